"""The formats markitdown reads: DOCX, PPTX, XLSX and EPUB, and an HTML page once :func:`.html.html_content`
has found its content. Markdown escaping is off, so that text copied from the document (an identifier
such as ``log_keep_days``) is found verbatim in the converted text."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from .conversion import ConversionError, Measured
from .html import html_content

#: markdownify options: keep the document's own characters (no backslash escapes).
_MARKDOWNIFY = {"escape_underscores": False, "escape_asterisks": False, "escape_misc": False}
#: Leading bytes of an OLE2 container: legacy .doc/.xls/.ppt, and password-protected Office files.
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def _html_markdown(markup: str, *, clean: bool, keep_links: bool) -> str | Measured:
    from markitdown import converters

    if not clean:
        return converters.HtmlConverter().convert_string(markup, **_MARKDOWNIFY).markdown
    content = html_content(markup, keep_links=keep_links)
    text = converters.HtmlConverter().convert_string(content.html, **_MARKDOWNIFY).markdown
    return Measured(text, content.visible_words, content.kept_words)


def markitdown_converter(kind: str) -> Callable[..., str]:
    def convert(path: Path, data: bytes, *, clean: bool = True, keep_links: bool = False) -> str | Measured:
        suffix = path.suffix.lower()
        try:
            from markitdown import StreamInfo, converters
            from markitdown._exceptions import MissingDependencyException
        except ImportError:  # pragma: no cover - a dependency of chunkwise
            raise ConversionError(f"{path}: reading {suffix} files needs markitdown: pip install "
                                  "'markitdown[docx,pptx,xlsx]'") from None
        if kind != "html" and data.startswith(_OLE_MAGIC):
            raise ConversionError(
                f"{path} is not a {suffix} file inside: it is password-protected (encrypted), or an older binary "
                f"Office format (.doc, .xls, .ppt) renamed; save it as {suffix} without a password")
        try:
            if kind == "html":
                from bs4 import UnicodeDammit

                text = UnicodeDammit(data, is_html=True).unicode_markup or ""
                return _html_markdown(text, clean=clean, keep_links=keep_links)
            converter = {"docx": converters.DocxConverter, "pptx": converters.PptxConverter,
                         "xlsx": converters.XlsxConverter, "epub": converters.EpubConverter}[kind]()
            info = StreamInfo(extension=suffix, filename=path.name, local_path=str(path))
            options = _MARKDOWNIFY if keep_links or not clean else {**_MARKDOWNIFY, "strip": ["a"]}
            return converter.convert(io.BytesIO(data), info, **options).markdown
        except MissingDependencyException:
            raise ConversionError(f"{path}: reading {suffix} files needs an optional package: pip install "
                                  f"'markitdown[{kind}]'") from None
        except ConversionError:
            raise
        except Exception as exc:  # the libraries raise anything on a damaged file
            detail = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise ConversionError(f"{path} cannot be converted: it is damaged or not a real {suffix} file "
                                  f"({type(exc).__name__}: {detail})") from None
    return convert
