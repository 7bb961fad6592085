"""Which parser a file goes to, decided from its name, and a cheap binary sniff.

The walker calls `detect_type` (no I/O) and `is_binary` (reads at most 8 KiB) on every
file it sees, so both must stay cheap: a cron run over a large tree pays them per file.
"""

from __future__ import annotations

from pathlib import Path

SNIFF_BYTES = 8192

# Every type `detect_type` can give a document: what `search --type` accepts.
DOCUMENT_TYPES = ("pdf", "markdown", "code", "text", "html", "docx", "image")

# Byte-order marks of encodings whose text legitimately contains NUL bytes.
WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")

MARKDOWN_EXTENSIONS = frozenset({"md", "markdown", "mdx", "mkd", "mdown"})
HTML_EXTENSIONS = frozenset({"html", "htm", "xhtml"})
# Pictures read by OCR (rag/parse/image.py); skipped when OCR is off or not installed.
IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp"})
TEXT_EXTENSIONS = frozenset({"txt", "text", "log", "rst", "csv", "tsv", "adoc", "org", "tex"})

# Extension -> language. Languages are short, lower-case names a user would type in a
# filter; aliases (mjs, yml, bash, ...) map to one name so filters do not need to know them.
CODE_EXTENSIONS: dict[str, str] = {
    "py": "py", "pyi": "py", "pyw": "py",
    "js": "js", "mjs": "js", "cjs": "js", "jsx": "jsx",
    "ts": "ts", "mts": "ts", "cts": "ts", "tsx": "tsx",
    "java": "java", "groovy": "groovy", "gradle": "groovy",
    "c": "c", "h": "c",
    "cpp": "cpp", "cc": "cpp", "cxx": "cpp", "hpp": "cpp", "hh": "cpp", "hxx": "cpp",
    "m": "objc", "mm": "objc",
    "rs": "rs", "go": "go", "rb": "rb", "php": "php", "swift": "swift",
    "kt": "kt", "kts": "kt", "cs": "cs", "fs": "fs", "vb": "vb",
    "scala": "scala", "sc": "scala", "clj": "clj", "ex": "ex", "exs": "ex", "erl": "erl",
    "hs": "hs", "ml": "ml", "dart": "dart", "zig": "zig", "nim": "nim", "jl": "jl",
    "lua": "lua", "r": "r", "pl": "pl", "pm": "pl",
    "css": "css", "scss": "scss", "sass": "sass", "less": "less",
    "vue": "vue", "svelte": "svelte", "astro": "astro",
    "xml": "xml", "xsd": "xml", "xsl": "xml", "plist": "xml",
    "json": "json", "jsonc": "json", "json5": "json", "ipynb": "json",
    "yaml": "yaml", "yml": "yaml", "toml": "toml", "ini": "ini", "cfg": "ini", "conf": "ini",
    "sh": "sh", "bash": "sh", "zsh": "sh", "fish": "fish", "ps1": "ps1", "bat": "bat",
    "sql": "sql", "graphql": "graphql", "gql": "graphql", "proto": "proto",
    "tf": "hcl", "hcl": "hcl", "cmake": "cmake", "mk": "make", "nix": "nix",
    "dockerfile": "dockerfile",
}  # fmt: skip

# Files recognised by their whole name (lower-cased), not an extension.
CODE_FILENAMES: dict[str, str] = {
    "dockerfile": "dockerfile", "containerfile": "dockerfile",
    "makefile": "make", "gnumakefile": "make",
    "rakefile": "rb", "gemfile": "rb", "jenkinsfile": "groovy", "vagrantfile": "rb",
    "cmakelists.txt": "cmake", "justfile": "make",
}  # fmt: skip

# Formats with no useful text for us (or none we can read without a new dependency).
BINARY_EXTENSIONS = frozenset({
    "gif", "ico", "icns", "psd", "heic",
    "svg", "svgz", "raw", "cr2", "nef",
    "mp3", "wav", "flac", "ogg", "oga", "m4a", "aac", "opus", "mid", "midi",
    "mp4", "m4v", "mkv", "avi", "mov", "webm", "wmv", "flv", "mpg", "mpeg",
    "zip", "tar", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "lz4", "lzma", "cab",
    "jar", "war", "ear", "apk", "aab", "deb", "rpm", "dmg", "iso", "img", "msi", "pkg",
    "exe", "dll", "so", "dylib", "o", "obj", "a", "lib", "ko", "bin", "elf", "out",
    "class", "pyc", "pyo", "pyd", "whl", "egg", "wasm",
    "ttf", "otf", "woff", "woff2", "eot",
    "doc", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf", "epub", "mobi",
    "sqlite", "sqlite3", "db", "mdb", "lance", "parquet", "arrow", "feather", "avro", "orc",
    "npy", "npz", "pkl", "pickle", "pt", "pth", "ckpt", "onnx", "gguf", "safetensors", "h5",
    "hdf5", "tflite", "mlmodel",
    "swp", "swo",
})  # fmt: skip


def _extension(path: Path) -> str:
    return path.suffix[1:].lower()


def detect_type(path: Path) -> tuple[str, str | None] | None:
    """The (type, language) a file is parsed as, from its name alone; None to skip it.

    Unknown extensions come back as ("text", None): a file of notes called `TODO` or
    `notes.weird` is still text, and `is_binary` (or parse_file) catches the ones that
    are not.
    """
    name = path.name.lower()
    if name in CODE_FILENAMES:
        return "code", CODE_FILENAMES[name]
    if name.startswith(("dockerfile.", "containerfile.")):
        return "code", "dockerfile"
    ext = _extension(path)
    if ext == "pdf":
        return "pdf", None
    if ext == "docx":
        return "docx", None
    if ext in IMAGE_EXTENSIONS:
        return "image", None
    if ext in MARKDOWN_EXTENSIONS:
        return "markdown", None
    if ext in HTML_EXTENSIONS:
        return "html", None
    if ext in TEXT_EXTENSIONS:
        return "text", None
    if ext in CODE_EXTENSIONS:
        return "code", CODE_EXTENSIONS[ext]
    if ext in BINARY_EXTENSIONS:
        return None
    return "text", None


def looks_binary(head: bytes) -> bool:
    """True if these first bytes of a file are not text: a NUL byte outside UTF-16/32."""
    if head.startswith(WIDE_BOMS):
        return False
    return b"\0" in head[:SNIFF_BYTES]


def is_binary(path: Path, head: bytes | None = None) -> bool:
    """True if the walker should skip this file without parsing it; `head` is its first
    SNIFF_BYTES bytes if the caller has read them (ingest reads a new file once, to hash
    and sniff it).

    PDF, DOCX and images are binary containers we do parse (images by OCR, or skipped
    by the parser when OCR is off), so they are never "binary" here. A
    file that cannot be opened is reported as not binary so that parse_file, which the
    walker calls next, fails it alone with the reason instead of skipping it silently.
    """
    kind = detect_type(path)
    if kind is not None and kind[0] not in CONTAINERS and head is None:
        try:
            with open(path, "rb") as fh:
                head = fh.read(SNIFF_BYTES)
        except OSError:
            return False
    return binary_kind(kind, head or b"")


# Binary containers whose text we read (images by OCR): never "binary" here.
CONTAINERS = ("pdf", "docx", "image")


def binary_kind(kind: tuple[str, str | None] | None, head: bytes) -> bool:
    """`is_binary` of a file whose `detect_type` and first bytes the caller has."""
    if kind is None:
        return True
    if kind[0] in CONTAINERS:
        return False
    return looks_binary(head)
