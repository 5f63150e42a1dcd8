"""Email: mbox files (Gmail Takeout, Thunderbird, ``mail`` spools), single ``.eml`` files,
and folders of ``.eml`` files.

* **Speaker**: the From display name (``"Souza, Ana"`` turned into ``Ana Souza``); for a
  bare address, the name that address goes by elsewhere in the same input (the mbox, or
  the folder of ``.eml``: a From name first, else the name given it most often), else the
  address. **Recipients**: the To and Cc people, the same way. The addresses, the
  subject, the Message-ID and the reply headers are in the message's metadata.
* **Time**: the Date header, converted to UTC.
* **Text**: the ``text/plain`` part, else the ``text/html`` part reduced to text. What the
  sender did not write is kept out of the text, in metadata: quoted lines (``> ...``),
  the quoted message after an attribution ("On Tue, 14 Mar 2023, Bo wrote:", Outlook's
  "-----Original Message-----" / "From: ... Sent: ..." block, HTML ``blockquote`` and
  Gmail quote blocks) go to ``metadata.quoted``; the signature (after a ``-- `` line, a
  closing sign-off such as "Best," or "Thanks," followed by a short name block, or
  "Sent from my iPhone") to ``metadata.signature``. Attachments are listed by file name.
* **Threads**: one conversation per thread. Messages are joined by Message-ID,
  In-Reply-To and References; the thread's id is ``email:<Message-ID of its first
  message>`` (as a reply's first References entry names it), so replies in other files
  or later mailboxes join the same conversation. Messages are ordered by date within a
  thread; the conversation's name is the subject without ``Re:``/``Fwd:``.

Duplicate copies of one Message-ID (the same mail in two folders of a mailbox) are read
once, with a warning.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Iterable, Iterator
from datetime import datetime
from email import message_from_bytes, policy
from email.message import EmailMessage
from email.message import Message as EmailPart
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    ConversationBuilder,
    FolderDigest,
    LoadOptions,
    MessageNotes,
    ParsedSource,
    RawMessage,
    SourceChanged,
    StreamedSource,
    clean_text,
    file_sha256,
    finish,
    merge_sources,
    read_bytes,
)
from structrag.models import Conversation, Message
from structrag.timeparse import parse_datetime

_HEADER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:[ \t]")
_EMAIL_HEADERS = ("from", "date", "subject", "to", "message-id", "received", "return-path")
_SUBJECT_PREFIX_RE = re.compile(r"^\s*(?:(?:re|fwd?|aw|sv|wg|tr|r)\s*(?:\[\d+\])?\s*:\s*)+", re.I)
_ATTRIBUTION_RE = re.compile(
    r"^\s*(?:On\b.{3,300}\bwrote\s*:|Am\b.{3,300}\bschrieb.{0,80}:|Le\b.{3,300}\ba écrit\s*:"
    r"|El\b.{3,300}\bescribió\s*:|-{2,}\s*Original Message\s*-{2,}"
    r"|-{2,}\s*Forwarded message\s*-{2,}|Begin forwarded message\s*:)\s*$",
    re.IGNORECASE | re.DOTALL,
)
_OUTLOOK_FROM_RE = re.compile(r"^\s*\*?From:\*?\s+\S")
_OUTLOOK_NEXT_RE = re.compile(r"^\s*\*?(?:Sent|Date|To|Subject):\*?\s", re.IGNORECASE)
_SIGN_OFF_RE = re.compile(
    r"^\s*(?:best(?: regards| wishes)?|thanks(?: again| so much| a lot)?|thank you|many thanks"
    r"|cheers|regards|kind regards|warm regards|warmly|all the best|sincerely|yours(?: truly)?"
    r"|talk soon|speak soon|take care|love|xo+|cordialement|viele grüße|liebe grüße|grüße"
    r"|saludos|un saludo)\s*[,.!]?\s*$",
    re.IGNORECASE,
)
_SENT_FROM_RE = re.compile(r"^\s*(?:Sent from my \w|Get Outlook for \w|Sent from Mail for)", re.I)


def looks_like_email(text: str) -> bool:
    """An mbox (a ``From `` line, then headers) or a message's header block at the top."""
    lines = text.lstrip("\ufeff\r\n").replace("\r\n", "\n").split("\n")
    if lines and lines[0].startswith("From ") and len(lines) > 1:
        lines = lines[1:]
    seen: set[str] = set()
    for line in lines[:60]:
        if not line.strip():
            break
        if line[:1] in (" ", "\t"):
            continue  # a folded header line
        if not _HEADER_RE.match(line):
            return False
        seen.add(line.split(":", 1)[0].lower())
    return "from" in seen and len(seen & set(_EMAIL_HEADERS)) >= 2


#: How much of a message :func:`_parse` looks at to tell that it is one.
_HEAD_BYTES = 16384
#: An mbox separator as mail programs write it: ``From <sender> <date>``, the date as C's
#: asctime writes it ("Tue Mar 12 14:05:00 2024", Gmail's "Wed Mar 06 17:30:48 +0000
#: 2024") or day first ("Tue, 12 Mar 2024 14:05:00"); the sender may be "-" (Thunderbird).
_SEPARATOR_RE = re.compile(
    rb"^From \S+ +(?:[A-Z][a-z]{2},? +)?(?:[A-Z][a-z]{2} +\d{1,2}|\d{1,2} +[A-Z][a-z]{2}"
    rb"(?: +\d{4})?) +\d{1,2}:\d{2}\b"
)


def _separates(line: bytes, after: Iterable[bytes]) -> bool:
    """Whether a ``From `` line after the first separates two messages: when it is
    ``From <sender> <date>``, or when a header block follows it; else it is a line of
    the message above that the mbox writer left unescaped ("From what I heard, ...")."""
    return bool(_SEPARATOR_RE.match(line)) or _opens_message(after)


def _opens_message(lines: Iterable[bytes]) -> bool:
    """Whether the lines after a ``From `` line start a message (a header block, as
    :func:`_parse` requires of one). Reads no
    further than :func:`looks_like_email` looks: blank lines and byte-order marks at the
    start, then up to the first blank line or next ``From `` line (at most 61 lines, or
    :data:`_HEAD_BYTES`)."""
    head: list[bytes] = []
    size = read = 0
    for line in lines:
        if line.startswith(b"From "):
            break  # where the message would end
        head.append(line)
        size += len(line)
        if read or line.lstrip(_LEADING):
            read += 1
            if not line.strip() or read > 61:
                break
        if size >= _HEAD_BYTES:
            break
    text = b"".join(head)[:_HEAD_BYTES]
    return looks_like_email(_unescape(text).decode("utf-8", "replace"))


def split_mbox(data: bytes) -> list[tuple[int, bytes]]:
    """An mbox's messages: (line number of its ``From `` line, the message's bytes). A
    ``From `` line is a separator when a header block follows it; else it is a line of the
    message above (written unescaped)."""
    starts = [0] if data.startswith(b"From ") else []
    for m in re.finditer(rb"\n(?=From )", data):
        after = data.find(b"\n", m.end())
        line = data[m.end() : len(data) if after < 0 else after + 1]
        if _separates(line, _lines_from(data, len(data) if after < 0 else after + 1)):
            starts.append(m.end())
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(data)
        chunk = data[start:end]
        body = chunk.split(b"\n", 1)[1] if b"\n" in chunk else b""
        out.append((data.count(b"\n", 0, start) + 1, _unescape(body)))
    return out


def _lines_from(data: bytes, start: int) -> Iterator[bytes]:
    """The lines of ``data`` from ``start`` on, each with its ``\n``."""
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _unescape(body: bytes) -> bytes:
    return re.sub(rb"(?m)^>(>*From )", rb"\1", body)  # mboxrd escaping


_LEADING = b"\r\n\xef\xbb\xbf"


def _mbox_parts(path: Path, digest: Any = None) -> Iterator[tuple[int, int, int, bytes]]:
    """An mbox's messages read line by line, as :func:`load_email` splits them: (line
    number of its ``From `` line, byte offset and size of the message after that line,
    its bytes with the mboxrd escaping undone). ``digest``: hashes every byte read."""
    lineno = offset = start = at = 0
    current: list[bytes] | None = None
    with path.open("rb") as handle:
        lines = _Lookahead(handle)
        for line in lines:
            lineno += 1
            offset += len(line)
            if digest is not None:
                digest.update(line)
            if current is None:
                if line.lstrip(_LEADING):
                    at, start, current = lineno, offset, []
                continue
            if line.startswith(b"From ") and _separates(line, lines.ahead()):
                yield at, start, offset - len(line) - start, _unescape(b"".join(current))
                at, start, current = lineno, offset, []
                continue
            current.append(line)
    if current is not None:
        yield at, start, offset - start, _unescape(b"".join(current))


class _Lookahead:
    """A file's lines, one at a time, with a look at the lines after the current one
    (:meth:`ahead`) that does not consume them."""

    def __init__(self, handle: Iterable[bytes]) -> None:
        self._lines = iter(handle)
        self._kept: deque[bytes] = deque()

    def __iter__(self) -> Iterator[bytes]:
        while True:
            if self._kept:
                yield self._kept.popleft()
                continue
            line = next(self._lines, None)
            if line is None:
                return
            yield line

    def ahead(self) -> Iterator[bytes]:
        """The lines after the current one; those read are kept for :meth:`__iter__`."""
        yield from list(self._kept)
        for line in self._lines:
            self._kept.append(line)
            yield line


def load_email(path: Path, data: bytes, options: LoadOptions) -> ParsedSource:
    """An mbox file or one message (``.eml``)."""
    stripped = data.lstrip(b"\r\n\xef\xbb\xbf")
    offset = data.count(b"\n", 0, len(data) - len(stripped))
    if stripped.startswith(b"From "):
        chunks = [(line + offset, body) for line, body in split_mbox(stripped)]
    else:
        chunks = [(offset + 1, stripped)]
    mails = [_parse(path, body, f"line {line}", line) for line, body in chunks]
    _name_people(mails)
    return _threads(path, mails, options)


def _eml_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".eml")
    if not files:
        raise InputError(folder, "the folder holds no .eml files")
    return files


def load_email_folder(folder: Path, options: LoadOptions) -> ParsedSource:
    """Every ``.eml`` file directly inside ``folder``, threaded together."""
    files = _eml_files(folder)
    digest = FolderDigest(folder)
    mails = []
    for file in files:
        data = read_bytes(file)
        digest.add(file, data)
        mails.append(_parse(file, data.lstrip(b"\r\n\xef\xbb\xbf"), file.name, 1))
    _name_people(mails)
    source = _threads(folder, mails, options)
    source.sha256 = digest.hexdigest()
    return source


class _Mail:
    def __init__(
        self,
        raw: RawMessage,
        msg_id: str,
        links: list[str],
        subject: str,
        people: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.raw = raw
        self.msg_id = msg_id
        self.links = links  # In-Reply-To and References ids
        self.subject = subject
        # (display name, address) of the sender, then of each To and Cc recipient
        self.people = people


def _ids(value: Any) -> list[str]:
    return re.findall(r"<([^<>\s]+)>", str(value or "")) or (
        [str(value).strip()]
        if value and str(value).strip() and " " not in str(value).strip()
        else []
    )


def _person(name: str, address: str, names: dict[str, str] | None = None) -> str:
    """A person's name: the display name, else the name ``names`` knows for the address
    (see :func:`_names`), else the address."""
    name = " ".join(name.replace('"', "").split())
    if name.count(",") == 1:  # "Souza, Ana" -> "Ana Souza"
        last, first = (p.strip() for p in name.split(","))
        if last and first and " " not in last:
            name = f"{first} {last}"
    if name and "@" not in name:
        return name
    if names and address and address.lower() in names:
        return names[address.lower()]
    return address or name


def _people(
    sender: tuple[str, str], to: list[tuple[str, str]], names: dict[str, str] | None = None
) -> tuple[str, tuple[str, ...]]:
    """The speaker and the recipients (To, then Cc; each once, not the speaker)."""
    speaker = _person(*sender, names)
    recipients = tuple(
        dict.fromkeys(p for p in (_person(n, a, names) for n, a in to) if p and p != speaker)
    )
    return speaker, recipients


def _names(mails: list[_Mail]) -> dict[str, str]:
    """The name each address goes by in these messages, by the address in lower case: the
    name its owner gives in a From header, else the one others give it most often (the
    first seen of equals). An address never seen with a name is not in it."""
    counts: dict[str, dict[str, list[int]]] = {}
    for mail in mails:
        for k, (name, address) in enumerate(mail.people):
            person = _person(name, "")
            if not address or not person or "@" in person:
                continue
            tally = counts.setdefault(address.lower(), {}).setdefault(person, [0, 0])
            tally[0 if k == 0 else 1] += 1
    return {
        address: max(named, key=lambda person: named[person])  # max keeps the first of equals
        for address, named in counts.items()
    }


def _name_people(mails: list[_Mail]) -> dict[str, str]:
    """Give each message's bare addresses the names they go by among ``mails``; the
    names found, for messages read again later (:func:`_stream_letters`)."""
    names = _names(mails)
    if names:
        for mail in mails:
            _named(mail, names)
    return names


def _named(mail: _Mail, names: dict[str, str]) -> None:
    if names and mail.people:
        sender, *to = mail.people
        mail.raw.speaker, mail.raw.recipients = _people(sender, to, names)


def _parse(path: Path, data: bytes, location: str, line: int) -> _Mail:
    head = data[:16384].decode("utf-8", "replace")
    if _HEADER_RE.match(head) and not looks_like_email(head):
        raise InputError(
            path,
            "the message has no From: header (or too few headers to be an email)",
            line=line,
            hint="every message needs From: and Date: or Subject:; fix or delete this one",
        )
    if not looks_like_email(head):
        raise InputError(
            path,
            "not an email: the message does not start with a header block "
            "(From:, Date:, Subject: ...)",
            line=line,
            hint="pass an mbox file or .eml files; for other text pass another --format",
        )
    msg = message_from_bytes(data, policy=policy.default)
    senders = getaddresses([str(v) for v in msg.get_all("From", [])])
    if not senders or not (senders[0][0] or senders[0][1]):
        raise InputError(path, "the message has no From: header", line=line)
    to = getaddresses([str(v) for v in msg.get_all("To", [])])
    cc = getaddresses([str(v) for v in msg.get_all("Cc", [])])
    # The names the message itself gives; _name_people names its bare addresses after.
    speaker, recipients = _people(senders[0], to + cc)
    date_text = str(msg.get("Date", "") or "")
    timestamp: datetime | str | None = date_text or None
    try:
        timestamp = parsedate_to_datetime(date_text) if date_text else None
    except (TypeError, ValueError, IndexError):
        pass  # finish() tries parse_datetime and keeps the text if that fails too
    subject = " ".join(str(msg.get("Subject", "") or "").split())
    body, quoted, signature = _body(msg)
    msg_ids = _ids(msg.get("Message-ID"))
    metadata: dict[str, Any] = {"subject": subject, "from_address": senders[0][1]}
    if to:
        metadata["to"] = [a or n for n, a in to]
    if cc:
        metadata["cc"] = [a or n for n, a in cc]
    if msg_ids:
        metadata["message_id"] = msg_ids[0]
    in_reply_to = _ids(msg.get("In-Reply-To"))
    references = _ids(msg.get("References"))
    if in_reply_to:
        metadata["in_reply_to"] = in_reply_to[0]
    if references:
        metadata["references"] = references
    if quoted:
        metadata["quoted"] = quoted
    if signature:
        metadata["signature"] = signature
    attachments = [
        str(part.get_filename())
        for part in (msg.iter_attachments() if isinstance(msg, EmailMessage) else [])
        if part.get_filename()
    ]
    if attachments:
        metadata["attachments"] = attachments
    msg_id = msg_ids[0] if msg_ids else _synthetic_id(speaker, date_text, subject, body)
    raw = RawMessage(
        text=body,
        location=location,
        id=msg_id,
        speaker=speaker,
        recipients=recipients,
        timestamp=timestamp,
        metadata=metadata,
    )
    # The thread's first message is the first References entry (RFC 5322 keeps it first).
    links = [*references, *in_reply_to]
    people = (senders[0], *to, *cc)
    return _Mail(raw, msg_id, links, _SUBJECT_PREFIX_RE.sub("", subject), people)


def _synthetic_id(*parts: str) -> str:
    return "no-message-id-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _part_text(part: EmailPart) -> str:
    try:
        content = part.get_content()  # type: ignore[attr-defined]
    except (LookupError, ValueError, AttributeError):
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def _body(msg: EmailPart) -> tuple[str, str, str]:
    """The text the sender wrote, the quoted text, and the signature."""
    part: EmailPart | None = msg
    if isinstance(msg, EmailMessage):
        part = msg.get_body(preferencelist=("plain", "html"))
    if part is None:
        return "", "", ""
    text = _part_text(part)
    quoted, signature = "", ""
    if part.get_content_subtype() == "html":
        html = _HTMLText()
        html.feed(text)
        html.close()
        text, quoted, signature = html.text(), html.quoted(), html.signature()
    body, more_quoted, more_signature = split_reply(text)
    quoted = "\n".join(q for q in (more_quoted, quoted) if q)
    signature = "\n".join(s for s in (more_signature, signature) if s)
    return body, quoted, signature


def _signed(line: str) -> bool:
    """Whether a line after a sign-off reads as the signature's (a name, a title, a
    number, an address), not as a sentence the sender wrote after "Thanks!" ("The door
    code is 4512", "P.S. bring the keys")."""
    text = line.strip()
    if len(text) > 40 or re.match(r"(?i)p\.?\s?s\b", text):
        return False
    return len(text.split()) <= 4 or bool(re.search(r"[@,|/+]|https?:|www\.", text))


def split_reply(text: str) -> tuple[str, str, str]:
    """Split an email body into what the sender wrote, what they quoted, and their
    signature; the written part keeps inline answers between quoted lines."""
    lines = clean_text(text).split("\n")
    cut = len(lines)
    for i, line in enumerate(lines):
        pair = line + " " + lines[i + 1] if i + 1 < len(lines) else line
        if _ATTRIBUTION_RE.match(line) or (
            line.strip().startswith("On ") and _ATTRIBUTION_RE.match(pair)
        ):
            cut = i
            break
        if re.match(r"^\s*_{10,}\s*$", line) or (
            _OUTLOOK_FROM_RE.match(line)
            and any(_OUTLOOK_NEXT_RE.match(n) for n in lines[i + 1 : i + 5])
        ):
            cut = i
            break
    quoted = lines[cut:]
    own: list[str] = []
    for line in lines[:cut]:
        (quoted if line.lstrip().startswith(">") else own).append(line)
    signature: list[str] = []
    for i in range(len(own) - 1, -1, -1):
        if own[i] in ("-- ", "--"):
            signature, own = own[i + 1 :], own[:i]
            break
    else:
        filled = [i for i, line in enumerate(own) if line.strip()]
        for i in filled[-5:]:
            rest = [line for line in own[i + 1 :] if line.strip()]
            sign_off = _SIGN_OFF_RE.match(own[i]) and len(rest) <= 3
            if (sign_off and all(_signed(r) for r in rest)) or _SENT_FROM_RE.match(own[i]):
                if any(line.strip() for line in own[:i]):  # never leave the message empty
                    signature, own = own[i:], own[:i]
                break
    return (
        clean_text("\n".join(own)),
        clean_text("\n".join(line for line in quoted)),
        clean_text("\n".join(signature)),
    )


class _HTMLText(HTMLParser):
    """HTML reduced to text, with quoted blocks and Gmail signatures set apart."""

    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr"}
    )
    _QUOTE_CLASSES = ("gmail_quote", "yahoo_quoted", "moz-cite-prefix", "protonmail_quote")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._out: dict[str, list[str]] = {"text": [], "quoted": [], "signature": []}
        self._stack: list[tuple[str, str | None]] = []  # (tag, the section it opened)
        self._skip = 0

    def _section(self) -> str:
        for _, opened in reversed(self._stack):
            if opened:
                return opened
        return "text"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head", "title"):
            self._skip += 1
            return
        if tag in self._BLOCKS:
            self._out[self._section()].append("\n")
        if tag in ("br", "hr", "img", "meta", "link", "input"):
            return
        classes = " ".join(v or "" for k, v in attrs if k in ("class", "id"))
        opened = None
        if tag == "blockquote" or any(c in classes for c in self._QUOTE_CLASSES):
            opened = "quoted"
        elif "gmail_signature" in classes or "signature" in classes.lower():
            opened = "signature"
        self._stack.append((tag, opened))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head", "title"):
            self._skip = max(0, self._skip - 1)
            return
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                del self._stack[i:]
                break
        if tag in self._BLOCKS:
            self._out[self._section()].append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._out[self._section()].append(data)

    def _joined(self, key: str) -> str:
        text = "".join(self._out[key]).replace("\xa0", " ")
        text = re.sub(r"[ \t]+", " ", text)
        return clean_text(re.sub(r"\n\s*\n\s*(\n\s*)+", "\n\n", text))

    def text(self) -> str:
        return self._joined("text")

    def quoted(self) -> str:
        return self._joined("quoted")

    def signature(self) -> str:
        return self._joined("signature")


def _threads(path: Path, mails: list[_Mail], options: LoadOptions) -> ParsedSource:
    """Group messages into threads (one conversation each) and order them by date."""
    grouped, warnings = _grouped(path, mails, options)
    parts = []
    for conversation, members in grouped:
        if options.conversation:
            for thread, mail in members:
                mail.raw.metadata["thread"] = thread
        parts.append(
            finish(
                path,
                "email",
                conversation,
                [mail.raw for _, mail in members],
                warnings=warnings if options.conversation else None,
            )
        )
    source = merge_sources(path, "email", parts)
    if not options.conversation:
        source.warnings.extend(warnings)
    return source


def _grouped(
    path: Path, mails: list[_Mail], options: LoadOptions
) -> tuple[list[tuple[Conversation, list[tuple[str, _Mail]]]], list[str]]:
    """The conversations of a mailbox's messages, each with its messages (and their
    thread's id) in order: a thread each, or all threads in one when ``--conversation``
    names one; and the warning on duplicate copies."""
    if not mails:
        raise InputError(path, "no email messages found")
    unique: list[_Mail] = []
    seen: set[str] = set()
    duplicates = 0
    for mail in mails:
        if mail.msg_id in seen:
            duplicates += 1
            continue
        seen.add(mail.msg_id)
        unique.append(mail)
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for mail in unique:
        for link in mail.links:
            parent[find(link)] = find(mail.msg_id)
    groups: dict[str, list[_Mail]] = {}
    for mail in unique:
        groups.setdefault(find(mail.msg_id), []).append(mail)

    def when(mail: _Mail) -> datetime:
        moment = parse_datetime(mail.raw.timestamp)
        return moment or datetime.max

    threads: list[tuple[str, list[_Mail]]] = []
    for members in groups.values():
        members.sort(key=when)
        first = members[0]
        thread = first.links[0] if first.links else first.msg_id
        threads.append((thread, members))
    threads.sort(key=lambda item: when(item[1][0]))
    warnings = []
    if duplicates:
        warnings.append(f"{path}: {duplicates} duplicate copie(s) of a message id were skipped")
    if options.conversation:
        conversation = Conversation(
            id=options.conversation,
            name=threads[0][1][0].subject or None,
            metadata={"source": str(path), "format": "email", "threads": len(threads)},
        )
        everything = [(thread, mail) for thread, members in threads for mail in members]
        return [(conversation, everything)], warnings
    grouped = []
    for thread, members in threads:
        people = sorted({m.raw.speaker for m in members if m.raw.speaker})
        conversation = Conversation(
            id=f"email:{thread}",
            name=members[0].subject or None,
            metadata={
                "source": str(path),
                "format": "email",
                "subject": members[0].subject,
                "participants": people,
            },
        )
        grouped.append((conversation, [(thread, mail) for mail in members]))
    return grouped, warnings


class _Letter(_Mail):
    """A message of a mailbox as its check keeps it: what threads it (its text and
    metadata left out), how long its text is, and where to read it again (``size`` bytes
    from ``start`` of an mbox, or a whole ``.eml`` file when ``size`` is None)."""

    def __init__(self, mail: _Mail, file: Path, line: int, start: int, size: int | None) -> None:
        raw = mail.raw
        light = RawMessage(
            text="", location=raw.location, id=raw.id, speaker=raw.speaker, timestamp=raw.timestamp
        )
        super().__init__(light, mail.msg_id, mail.links, mail.subject, mail.people)
        self.file, self.line, self.start, self.size = file, line, start, size
        self.chars, self.blank = len(raw.text), not raw.text.strip()

    def read(self) -> _Mail:
        if self.size is None:
            data = read_bytes(self.file).lstrip(_LEADING)
            return _parse(self.file, data, self.file.name, 1)
        with self.file.open("rb") as handle:
            handle.seek(self.start)
            body = _unescape(handle.read(self.size))
        return _parse(self.file, body, f"line {self.line}", self.line)


def stream_email(path: Path, options: LoadOptions) -> StreamedSource | None:
    """An mbox (or a folder of ``.eml``) checked one message at a time, keeping of each
    only what threads it and where it is; its messages are read again, thread by thread,
    from where they are when they are written. None for a single message (``.eml``),
    which is read whole."""
    if path.is_dir():
        digest = FolderDigest(path)
        letters: list[_Mail] = []
        for file in _eml_files(path):
            data = read_bytes(file)
            digest.add(file, data)
            mail = _parse(file, data.lstrip(_LEADING), file.name, 1)
            letters.append(_Letter(mail, file, 1, 0, None))
        return _stream_letters(path, letters, digest.hexdigest(), options)
    try:
        with path.open("rb") as handle:
            head = handle.read(65536)
    except OSError:
        return None  # load_source says what is wrong
    if not head.lstrip(_LEADING).startswith(b"From "):
        return None
    hashed = hashlib.sha256()
    letters = [
        _Letter(_parse(path, body, f"line {line}", line), path, line, start, size)
        for line, start, size, body in _mbox_parts(path, hashed)
    ]
    return _stream_letters(path, letters, hashed.hexdigest(), options)


def _now(path: Path) -> str:
    """The hash a mailbox has now (as its check takes it)."""
    if not path.is_dir():
        return file_sha256(path)
    digest = FolderDigest(path)
    try:
        for file in _eml_files(path):
            digest.add(file, read_bytes(file))
    except InputError:
        return ""
    return digest.hexdigest()


def _stream_letters(
    path: Path, letters: list[_Mail], checked: str, options: LoadOptions
) -> StreamedSource:
    names = _name_people(letters)
    grouped, copies = _grouped(path, letters, options)
    speakers: list[set[str]] = []
    noted: list[str] = []
    count = 0
    for _, members in grouped:
        notes = MessageNotes()
        for _, letter in members:
            assert isinstance(letter, _Letter)
            raw = letter.raw
            if raw.timestamp not in (None, "") and parse_datetime(raw.timestamp) is None:
                notes.unparsed(raw.location)
            notes.look_size(path, raw.location, letter.msg_id, letter.chars, letter.blank)
        speakers.append({m.raw.speaker for _, m in members if m.raw.speaker})
        count += len(members)
        noted.extend(notes.warnings(path))
    warnings = [*copies, *noted] if options.conversation else [*noted, *copies]

    def messages() -> Iterator[Message]:
        for (conversation, members), people in zip(grouped, speakers, strict=True):
            builder = ConversationBuilder(conversation.id, people)
            for thread, letter in members:
                assert isinstance(letter, _Letter)
                mail = letter.read()
                if mail.msg_id != letter.msg_id:
                    raise SourceChanged(str(path))
                _named(mail, names)
                if options.conversation:
                    mail.raw.metadata["thread"] = thread
                message = builder.message(mail.raw)
                builder.keep()
                yield message

    def read() -> Iterator[Message]:
        try:
            yield from messages()
        except (InputError, SourceChanged):
            if _now(path) != checked:
                raise SourceChanged(str(path)) from None
            raise
        if _now(path) != checked:
            raise SourceChanged(str(path))

    return StreamedSource(
        path=str(path),
        format="email",
        conversations=[conversation for conversation, _ in grouped],
        count=count,
        sha256=checked,
        read=read,
        warnings=warnings,
    )
