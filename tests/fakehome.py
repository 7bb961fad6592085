"""A home holding a fake credential of each kind the file tools must never read (issue 29),
shared by the tool tests and the chat tests."""

from __future__ import annotations

from pathlib import Path

RSA = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7fakefakefakefakefake\n"
       "c2VjcmV0IGJvZHkgb2YgdGhlIGtleQ==\n-----END RSA PRIVATE KEY-----\n")
KEY_BODY = "MIIEowIBAAKCAQEA7fakefakefakefakefake"
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
# Each credential by its path under the home, with its text.
CREDENTIALS = {
    ".ssh/id_rsa": RSA,
    ".ssh/config": "Host box\n  IdentityFile ~/.ssh/id_rsa\n  User ssh-config-user-42\n",
    ".gnupg/private-keys-v1.d/A1.key": "gpg-private-material-77\n",
    ".aws/credentials": f"[default]\naws_access_key_id = {AWS_ID}\n",
    ".azure/accessTokens.json": '{"accessToken": "azure-token-31"}\n',
    ".config/gcloud/credentials.db": "gcloud-refresh-token-19\n",
    ".kube/config": "users:\n- user: {token: kube-token-58}\n",
    ".docker/config.json": '{"auths": {"x": {"auth": "ZG9ja2VyLWF1dGgtMjM="}}}\n',
    ".netrc": "machine host login me password netrc-pass-64\n",
    ".pgpass": "db:5432:*:me:pgpass-pass-12\n",
    ".git-credentials": "https://me:git-cred-pass-88@github.com\n",
    "project/.env": f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n",
    "project/.env.production": "DB_PASSWORD=env-prod-pass-45\n",
    "project/server.pem": "pem-material-29\n",
    "project/tls.key": "tls-key-material-63\n",
    "project/client.p12": "p12-material-71\n",
    "project/id_ed25519": "ed25519-material-90\n",
    "project/backup.txt": RSA.replace("RSA ", "OPENSSH "),  # caught by its first bytes
}
# What must never be seen anywhere: one value out of each credential.
MARKERS = (KEY_BODY, "ssh-config-user-42", "gpg-private-material-77", AWS_ID, "azure-token-31",
           "gcloud-refresh-token-19", "kube-token-58", "ZG9ja2VyLWF1dGgtMjM", "netrc-pass-64",
           "pgpass-pass-12", "git-cred-pass-88", AWS_SECRET, "env-prod-pass-45",
           "pem-material-29", "tls-key-material-63", "p12-material-71", "ed25519-material-90")
ORDINARY = "project/notes.md"
ORDINARY_TEXT = "# Notes\nthe build server is ci-7\n"


def make_home(folder: Path) -> Path:
    """Write every credential, a public key and one ordinary file under `folder`."""
    for name, text in CREDENTIALS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "project/id_ed25519.pub").write_text("ssh-ed25519 AAAA public\n")
    (folder / ORDINARY).write_text(ORDINARY_TEXT)
    return folder


def leaked(text: str) -> list[str]:
    """The credential values found in `text` (the test wants none)."""
    return [marker for marker in MARKERS if marker in text]
