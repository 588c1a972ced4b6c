"""A text file's bytes as text: strict UTF-8, or the UTF-8, UTF-16 or UTF-32 flavour a byte-order
mark announces (the mark dropped, line endings kept); binary data and other encodings refused with
a message naming the encoding the data seems to be in."""

from __future__ import annotations

import codecs
import contextlib
from pathlib import Path

from ..errors import ChunkwiseError, CorpusError

#: Byte-order marks and the codecs they announce; UTF-32 LE first, as it begins like UTF-16 LE.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
#: Bytes examined to tell text from binary.
_SNIFF = 8192


def decode_text(data: bytes, where: str | Path,
                error: type[ChunkwiseError] = CorpusError) -> tuple[str, str]:
    """Decode a text file's bytes; returns ``(text, encoding)``.

    Text is strict UTF-8, or, when the data starts with a byte-order mark, the UTF-8,
    UTF-16 or UTF-32 flavour the mark announces (``encoding`` is then ``"utf-8-sig"``,
    ``"utf-16-le"`` and so on; otherwise ``"utf-8"``). The mark is dropped: offsets into
    ``text`` count the characters after it. Line endings are kept as they are.

    Raises:
        error: the data is binary, or not valid in its encoding; the message names
            ``where`` and, when it can be told, the encoding the data seems to be in.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            label = _label(encoding)
            try:
                text = data[len(bom):].decode(encoding.removesuffix("-sig"))
            except UnicodeDecodeError as exc:
                raise error(f"{where} starts with a {label} byte-order mark but is not valid {label} "
                            f"(byte {exc.start + len(bom)}); convert it to UTF-8 first") from None
            if "\0" in text[:_SNIFF]:
                raise error(f"{where} is a binary file, not text (it starts like {label} but holds NUL "
                            "characters)")
            return text, encoding
    if b"\0" in data[:_SNIFF]:
        guess = _bomless_utf16_or_32(data)
        if guess:
            raise error(f"{where} is a binary file, not UTF-8 text; it looks like {guess} text without a "
                        "byte-order mark: convert it to UTF-8 (or save it with a byte-order mark)")
        raise error(f"{where} is a binary file, not UTF-8 text")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        guess = ""
        with contextlib.suppress(UnicodeDecodeError):
            data.decode("cp1252")
            guess = "; it may be Windows-1252 or Latin-1"
        raise error(
            f"{where} is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}){guess}; "
            "convert it to UTF-8 first"
        ) from None


def _label(encoding: str) -> str:
    return encoding.removesuffix("-sig").upper().replace("-LE", " LE").replace("-BE", " BE")


def _bomless_utf16_or_32(data: bytes) -> str | None:
    """``"UTF-16 LE"`` (etc.) when NUL-bearing data reads like mostly-ASCII UTF-16/32 text."""
    sample = data[:_SNIFF]
    for width, encoding in ((4, "utf-32-le"), (4, "utf-32-be"), (2, "utf-16-le"), (2, "utf-16-be")):
        body = sample[: len(sample) - len(sample) % width]
        if not body:
            continue
        # ASCII in UTF-16 LE is "x\0", in UTF-16 BE "\0x"; the zero bytes sit at fixed offsets.
        zero_at = range(1, width) if encoding.endswith("le") else range(width - 1)
        units = len(body) // width
        if all(body[i::width].count(0) >= 0.9 * units for i in zero_at):
            try:
                text = body.decode(encoding)
            except UnicodeDecodeError:
                continue
            if "\0" not in text:
                return _label(encoding)
    return None
