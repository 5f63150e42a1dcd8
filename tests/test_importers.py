"""Importers: every format parses, and bad input fails with the file and position."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structrag.errors import InputError, UnknownFormatError
from structrag.importers import LoadOptions, ParsedSource, detect_format, load_source
from structrag.importers.base import HUGE_MESSAGE_CHARS, StreamedSource
from structrag.models import Action
from tests.conftest import locomo_sample


def test_locomo_sessions_turns_and_dates(locomo_file: Path) -> None:
    source = load_source(locomo_file)
    assert source.format == "locomo"
    assert [c.id for c in source.conversations] == ["conv-test"]
    assert [m.id for m in source.messages] == [f"D{s}:{t}" for s in (1, 2) for t in (1, 2, 3, 4)]
    first = source.messages[0]
    assert first.speaker == "Alice"
    assert first.recipients == ("Bob",)
    assert first.timestamp == datetime(2023, 5, 8, 13, 56)
    assert first.metadata["session"] == 1
    assert source.messages[4].timestamp == datetime(2023, 5, 25, 10, 15)
    captioned = source.messages[-1]
    assert captioned.text.endswith("[shares a photo of a painting of a sunset]")
    assert "image_caption" not in captioned.metadata  # the caption is in the text only


def test_locomo_per_turn_dates_and_missing_sample_id(tmp_path: Path) -> None:
    path = tmp_path / "my_chat.json"
    path.write_text(json.dumps(locomo_sample(None, per_turn_dates=True)))
    source = load_source(path)
    assert [c.id for c in source.conversations] == ["my_chat"]
    assert source.messages[0].timestamp == datetime(2023, 5, 8, 13, 56)
    assert source.messages[-1].timestamp == datetime(2023, 5, 25, 10, 15)


def test_locomo_clean_text_is_used_when_text_is_missing(tmp_path: Path) -> None:
    sample = locomo_sample()
    turn = sample["conversation"]["session_1"][0]  # type: ignore[index]
    turn["clean_text"] = turn.pop("text")
    path = tmp_path / "c.json"
    path.write_text(json.dumps(sample))
    assert load_source(path).messages[0].text.startswith("Hi Bob!")


def test_transcript_multiline_turns_and_header(transcript_file: Path) -> None:
    source = load_source(transcript_file)
    assert source.format == "transcript"
    speakers = [m.speaker for m in source.messages]
    assert speakers == ["Host Name", "Dana Reyes", "Host Name", "Dana Reyes"]
    assert "roof in Chicago" in source.messages[0].text
    assert "[MUSIC]" in source.messages[0].text
    assert source.conversations[0].metadata["header"].startswith("Tech Talk Podcast")
    assert source.messages[1].recipients == ("Host Name",)
    assert source.messages[0].metadata["source_line"] == 4


def test_webvtt_merges_cues_of_one_speaker(vtt_file: Path) -> None:
    source = load_source(vtt_file)
    assert source.format == "webvtt"
    assert [m.speaker for m in source.messages] == ["Rosa Diaz", "Tom Lee"]
    assert source.messages[0].text == (
        "I fixed the login bug yesterday. Today I will review the payment code."
    )
    assert source.messages[0].metadata["start"] == 1.0
    assert source.messages[0].metadata["end"] == 6.5
    assert source.messages[0].metadata["cues"] == ["1", "2"]


def test_transcript_labels_in_any_script_and_numbered_speakers(tmp_path: Path) -> None:
    path = tmp_path / "meeting.txt"
    path.write_text(
        "ANA SOUZA: Good morning.\nJürgen Müller: Thanks Ana.\nÉlodie Martin: A question.\n"
        "Øyvind: I will book the hotel.\nSpeaker 2: hello there\nJÜRGEN MÜLLER: fine\n"
        "the notes: a line of the same turn\nStep 1: a numbered line is no speaker\n"
        "Agent 1: numbered people speak\nSprecher 2: in any language\n",
        encoding="utf-8",
    )
    source = load_source(path)
    assert [(m.speaker, m.text) for m in source.messages] == [
        ("Ana Souza", "Good morning."),
        ("Jürgen Müller", "Thanks Ana."),
        ("Élodie Martin", "A question."),
        ("Øyvind", "I will book the hotel."),
        ("Speaker 2", "hello there"),
        (
            "Jürgen Müller",
            "fine\nthe notes: a line of the same turn\nStep 1: a numbered line is no speaker",
        ),
        ("Agent 1", "numbered people speak"),
        ("Sprecher 2", "in any language"),
    ]


def test_webvtt_voices_references_and_captions(tmp_path: Path) -> None:
    path = tmp_path / "talk.vtt"
    path.write_text(
        "WEBVTT\n\n1\n00:00:01.000 --> 00:00:03.000\n"
        "<v Ana Souza>Hi Bo &amp; Carla, R&amp;D is &lt;great&gt;</v>\n\n"
        "2\n00:00:03.000 --> 00:00:05.000\n<v Bo Chen>Thanks.</v>\n<v Carla>Me too.</v>\n",
        encoding="utf-8",
    )
    source = load_source(path)
    assert [(m.speaker, m.text) for m in source.messages] == [
        ("Ana Souza", "Hi Bo & Carla, R&D is <great>"),
        ("Bo Chen", "Thanks."),
        ("Carla", "Me too."),
    ]
    # captions of no speaker: joined up to 400 characters or a pause, not one message
    cues = "".join(
        f"{i}\n00:{i // 60:02d}:{i % 60:02d}.000 --> 00:{i // 60:02d}:{i % 60:02d}.900\n"
        f"words of caption number {i} go on here\n\n"
        for i in range(60)
    )
    captions = tmp_path / "captions.vtt"
    captions.write_text("WEBVTT\n\n" + cues, encoding="utf-8")
    messages = load_source(captions).messages
    assert len(messages) > 4
    assert all(len(m.text) < 450 for m in messages)
    assert " ".join(m.text for m in messages).count("caption number") == 60


def _cues(start: int, count: int, step: int, text: str) -> str:
    out = []
    for i in range(count):
        at = start + i * step
        out.append(
            f"00:{at // 60:02d}:{at % 60:02d}.000 --> 00:{at // 60:02d}:{at % 60:02d}.900\n"
            f"{text} {i}\n\n"
        )
    return "".join(out)


def test_webvtt_untagged_cues_after_a_voice_keep_to_the_pause_and_a_turns_length(
    tmp_path: Path,
) -> None:
    """One voice tag, then untagged cues: theirs while they follow without a pause (a
    long turn split every 2,000 characters); after a pause, captions of no speaker."""
    spaced = tmp_path / "spaced.vtt"
    spaced.write_text(
        "WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n<v Host>Welcome to the show.\n\n"
        + _cues(20, 5, 20, "a caption long after"),
        encoding="utf-8",
    )
    messages = load_source(spaced).messages
    assert [m.speaker for m in messages] == ["Host", None, None, None, None, None]
    assert messages[0].text == "Welcome to the show."
    turn = tmp_path / "turn.vtt"
    turn.write_text(
        "WEBVTT\n\n00:00:00.000 --> 00:00:00.900\n<v Host>Welcome.\n\n"
        + _cues(1, 150, 1, "and the host keeps on talking about the garden"),
        encoding="utf-8",
    )
    messages = load_source(turn).messages
    assert len(messages) > 2 and {m.speaker for m in messages} == {"Host"}
    assert all(len(m.text) < 2100 for m in messages)
    assert " ".join(m.text for m in messages).count("keeps on talking") == 150


def test_jsonl_aliases_and_parts(jsonl_file: Path) -> None:
    source = load_source(jsonl_file)
    assert source.format == "jsonl"
    assert source.messages[1].speaker == "assistant"
    assert source.messages[1].text == "Great. Do you need a hotel near Shibuya?"
    assert source.messages[0].timestamp == datetime(2024, 3, 1, 9, 0)
    assert source.messages[2].tags == ("travel",)
    assert [c.id for c in source.conversations] == ["chat"]


def test_json_conversations_layout(tmp_path: Path) -> None:
    path = tmp_path / "multi.json"
    path.write_text(
        json.dumps(
            {
                "conversations": [
                    {"id": "a", "messages": [{"text": "one"}, {"text": "two"}]},
                    {"id": "b", "name": "Bee", "messages": [{"speaker": "x", "text": "three"}]},
                ]
            }
        )
    )
    source = load_source(path)
    assert [c.id for c in source.conversations] == ["a", "b"]
    assert [(m.conversation, m.id) for m in source.messages] == [("a", "1"), ("a", "2"), ("b", "1")]


def test_typeagent_import_keeps_knowledge_with_spans_in_text(tmp_path: Path) -> None:
    data = {
        "nameTag": "ep1",
        "fileHeader": {"version": "0.1"},
        "messages": [
            {"textChunks": ["Intro"], "metadata": {}, "tags": [], "timestamp": None},
            {
                "textChunks": ["I wrote a book about spiders.", "It took ten years."],
                "metadata": {"speaker": "adrian", "listeners": ["kevin"]},
                "tags": [],
                "timestamp": "2023-05-01T07:00:04.346Z",
            },
        ],
        "semanticRefs": [
            {
                "semanticRefOrdinal": 0,
                "range": {"start": {"messageOrdinal": 1, "chunkOrdinal": 0}},
                "knowledgeType": "entity",
                "knowledge": {
                    "name": "spiders",
                    "type": ["animal"],
                    "facets": [{"name": "count", "value": {"amount": 3, "units": "kinds"}}],
                },
            },
            {
                "semanticRefOrdinal": 1,
                "range": {"start": {"messageOrdinal": 1, "chunkOrdinal": 1}},
                "knowledgeType": "action",
                "knowledge": {
                    "verbs": ["take"],
                    "verbTense": "past",
                    "subjectEntityName": "book",
                    "objectEntityName": "none",
                    "indirectObjectEntityName": "none",
                    "params": ["ten years"],
                    "subjectEntityFacet": None,
                },
            },
            {
                "semanticRefOrdinal": 2,
                "range": {"start": {"messageOrdinal": 1, "chunkOrdinal": 1}},
                "knowledgeType": "topic",
                "knowledge": {"text": "writing time"},
            },
        ],
    }
    path = tmp_path / "ep_index_data.json"
    path.write_text(json.dumps(data))
    source = load_source(path)
    assert source.format == "typeagent"
    assert len(source.knowledge) == 3
    message = source.messages[1]
    assert message.text == "I wrote a book about spiders.\nIt took ten years."
    spider = source.knowledge[0]
    assert message.text[spider.span.start : spider.span.end] == "spiders"
    action = source.knowledge[1].knowledge
    assert isinstance(action, Action)
    assert (action.subject, action.object, action.tense) == ("book", None, "past")
    assert action.params[0].value == "ten years"
    # "take" is not in the chunk verbatim, so the span is the whole chunk.
    second_chunk = len("I wrote a book about spiders.\n")
    assert source.knowledge[1].span.start == second_chunk
    topic = source.knowledge[2]
    assert topic.span.start == len("I wrote a book about spiders.\n")
    assert topic.span.end == len(message.text)


# -- errors ---------------------------------------------------------------------------


def test_truncated_json_names_line_and_says_truncated(tmp_path: Path) -> None:
    full = json.dumps([locomo_sample()], indent=1)
    path = tmp_path / "cut.json"
    path.write_text(full[: len(full) // 2])
    with pytest.raises(InputError) as info:
        load_source(path)
    err = info.value
    assert err.path == str(path)
    assert err.line is not None and err.line > 1
    assert "truncated" in str(err)


@pytest.mark.parametrize("layout", ["locomo", "telegram", "messenger"])
def test_json_cut_inside_a_string_says_truncated(tmp_path: Path, layout: str) -> None:
    """The decoder names where an open string starts, not the end of the file: a file cut
    inside a string is still called truncated (whole and streamed readers alike)."""
    text = "a long message that the download cut off half way through"
    if layout == "locomo":
        data: Any = [locomo_sample()]
        data[0]["conversation"]["session_1"][0]["text"] = text
    elif layout == "telegram":
        data = {
            "name": "Ana",
            "type": "personal_chat",
            "id": 7,
            "messages": [
                {"id": 1, "type": "message", "date": "2023-03-12T14:01:05", "from": "Ana",
                 "from_id": "user1", "text": text},
            ],
        }  # fmt: skip
    else:
        data = {
            "participants": [{"name": "Ana"}, {"name": "Bob"}],
            "messages": [{"sender_name": "Ana", "timestamp_ms": 1678629665000, "content": text}],
            "title": "Ana",
            "thread_path": "inbox/ana_1",
        }
    full = json.dumps(data, indent=1)
    path = tmp_path / ("message_1.json" if layout == "messenger" else "cut.json")
    path.write_text(full[: full.index(text) + 20], encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_source(path)
    assert "Unterminated string" in str(info.value)
    assert "truncated" in str(info.value), str(info.value)


def test_truncated_jsonl_names_the_last_line(jsonl_file: Path) -> None:
    text = jsonl_file.read_text()
    jsonl_file.write_text(text[: len(text) - 20])
    with pytest.raises(InputError) as info:
        load_source(jsonl_file)
    assert info.value.line == 3
    assert "truncated" in str(info.value)
    assert not re.search(r"invalid JSON: .* (at|starting)$", str(info.value), re.MULTILINE)
    jsonl_file.write_text('{"text": "ab\n{"text": "c"}\n')  # the position is given apart
    with pytest.raises(InputError, match=r"column 10: invalid JSON: Unterminated string\n"):
        load_source(jsonl_file)


def test_non_utf8_bytes_name_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ALICE: hello\nBOB: caf\xe9 time\n")
    with pytest.raises(InputError) as info:
        load_source(path)
    assert (info.value.line, info.value.column) == (2, 9)
    assert "--encoding" in str(info.value)
    source = load_source(path, options=LoadOptions(encoding="latin-1"))
    assert source.messages[1].text == "café time"


@pytest.mark.parametrize(
    ("name", "text"),
    [("chat.txt", "ALICE: hello\n"), ("chat.jsonl", '{"speaker": "Ann", "text": "hi"}\n')],
)
def test_utf16_without_and_with_a_byte_order_mark(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    from structrag.importers import scan_source

    path.write_bytes(text.encode("utf-16-le"))  # no byte order mark
    with pytest.raises(InputError, match="--encoding utf-16le"):  # read as a stream
        scan_source(path, options=LoadOptions(encoding="utf-16"))
    assert scan_source(path, options=LoadOptions(encoding="utf-16le")).count == 1
    path.write_bytes(text.encode("utf-16"))  # with one: it names the encoding
    assert load_source(path).count == 1
    assert scan_source(path).count == 1
    assert load_source(path, options=LoadOptions(encoding="latin-1")).count == 1
    assert load_source(path, options=LoadOptions(encoding="utf-16")).count == 1
    path.write_bytes(text.encode("utf-32"))
    assert scan_source(path).count == 1


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        (
            "c.json",
            '{"conversations": [{"id": ["x"], "messages": [{"text": "hi"}]}]}',
            "conversations[0].id: a conversation id must be a JSON string or integer, found array",
        ),
        (
            "c.json",
            '{"conversations": [{"id": 7, "messages": [{"id": true, "text": "hi"}]}]}',
            "a message id must be a JSON string or integer, found boolean",
        ),
        ("c.jsonl", '{"id": 1.5, "text": "hi"}\n', "string or integer, found number"),
        ("c.jsonl", '{"conversation": true, "text": "hi"}\n', "'conversation' must be a string"),
    ],
)
def test_ids_of_the_wrong_json_type_are_refused(
    tmp_path: Path, name: str, text: str, error: str
) -> None:
    from structrag.importers import scan_source

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(error)):
        scan_source(path)


def test_json_lines_read_as_one_json_document_point_to_jsonl(tmp_path: Path) -> None:
    from structrag.importers import scan_source

    path = tmp_path / "two.json"
    path.write_text('{"text": "hi"}\n{"text": "yo"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="--format jsonl") as info:
        scan_source(path)
    assert info.value.line == 2


def test_conflicting_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dupes.jsonl"
    path.write_text('{"id": "1", "text": "a"}\n{"id": "1", "text": "b"}\n')
    with pytest.raises(InputError) as info:
        load_source(path)
    assert "line 2" in str(info.value) and "line 1" in str(info.value)


def test_exact_duplicates_are_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "dupes.jsonl"
    path.write_text(
        '{"id": "1", "text": "a"}\n{"id": "1", "text": "a"}\n{"id": "2", "text": "c"}\n'
    )
    source = load_source(path)
    assert [m.id for m in source.messages] == ["1", "2"]
    assert any("skipped" in w for w in source.warnings)


def test_empty_and_huge_messages_are_kept_and_explained(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    huge = "word " * (HUGE_MESSAGE_CHARS // 5 + 10)
    path.write_text(
        json.dumps({"id": "e", "text": "   "}) + "\n" + json.dumps({"id": "h", "text": huge}) + "\n"
    )
    source = load_source(path)
    assert [m.id for m in source.messages] == ["e", "h"]
    assert any("empty" in w for w in source.warnings)
    assert any("knowledge is extracted from its first" in w for w in source.warnings)


def test_missing_text_field_names_the_json_position(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"messages": [{"text": "ok"}, {"speaker": "x"}]}))
    with pytest.raises(InputError, match=r"messages\[1\]"):
        load_source(path)


def test_malformed_vtt_timing(tmp_path: Path) -> None:
    path = tmp_path / "bad.vtt"
    path.write_text("WEBVTT\n\n1\n00:00:01.000 --> soon\nhello\n")
    with pytest.raises(InputError) as info:
        load_source(path)
    assert info.value.line == 4


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    odd = tmp_path / "x.bin"
    odd.write_text("hello")
    with pytest.raises(UnknownFormatError):
        load_source(odd)
    with pytest.raises(UnknownFormatError, match="unknown format"):
        load_source(odd, format="pdf")
    with pytest.raises(InputError, match="not found"):
        load_source(tmp_path / "missing.json")


def test_detection_by_content(tmp_path: Path, locomo_file: Path) -> None:
    text = locomo_file.read_text()
    assert detect_format(Path("x.data"), text)[0] == "locomo"
    assert detect_format(Path("x"), "WEBVTT\n\n")[0] == "webvtt"
    assert detect_format(Path("x"), '{"text": "a"}\n{"text": "b"}\n')[0] == "jsonl"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".json", ".jsonl", ".txt", ".vtt"]))
def test_any_bytes_give_a_source_or_an_input_error(
    tmp_path: Path, data: bytes, suffix: str
) -> None:
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data)
    try:
        source = load_source(path)
    except InputError as exc:
        assert exc.path == str(path)
    else:
        assert source.messages
        assert all(m.conversation == source.conversations[0].id for m in source.messages[:1])


def test_unpaired_surrogates_are_rejected_with_the_position(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    good = '{"id": "1", "speaker": "Kim", "text": "a pair \\ud83d\\ude00 is fine"}\n'
    for bad in (
        '{"id": "2", "speaker": "Kim", "text": "broken \\ud800 escape"}',
        '{"id": "2", "speaker": "Kim", "text": "ok", "tags": ["\\udc00"]}',
        '{"id": "2", "speaker": "Kim", "text": "ok", "metadata": {"k": "\\ud800x"}}',
    ):
        path.write_text(good + bad + "\n", encoding="utf-8")
        with pytest.raises(InputError) as info:
            load_source(path)
        assert "surrogate" in str(info.value) and info.value.line == 2, bad
        assert bad[(info.value.column or 0) - 1 :].startswith("\\u"), bad
    path.write_text(good, encoding="utf-8")
    assert load_source(path).messages[0].text == "a pair \U0001f600 is fine"
    whole = tmp_path / "chat.json"
    whole.write_text('[\n {"text": "fine"},\n {"text": "\\udbff"}\n]', encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_source(whole)
    assert info.value.line == 3 and info.value.column == 12


def test_typeagent_shapes_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "index_data.json"
    path.write_text(
        json.dumps(
            {
                "fileHeader": ["not", "an", "object"],
                "messages": [{"textChunks": ["Hello there."], "metadata": {"speaker": "Ann"}}],
                "semanticRefs": [],
            }
        ),
        encoding="utf-8",
    )
    with pytest.raises(InputError) as info:
        load_source(path, format="typeagent")
    assert "fileHeader" in str(info.value)


def _typeagent_document(refs_first: bool) -> dict[str, object]:
    """A KnowPro index: messages of one and two chunks, one with no speaker; semantic refs
    out of message order (as KnowPro keeps them), one of a kind not imported; a term index
    and file tags; ``refs_first``: the refs come before the messages in the file."""
    messages = [
        {
            "textChunks": [f"Line {i}: Ana met Bo in Porto.", "They talked about boats."][
                : 1 + i % 2
            ],
            "metadata": {"speaker": "ana" if i % 3 else None, "listeners": ["bo"]},
            "tags": ["intro"] if i == 0 else [],
            "timestamp": f"2023-05-01T07:00:{i:02d}.346Z",
        }
        for i in range(12)
    ]
    refs: list[dict[str, object]] = []
    for i in reversed(range(12)):
        start = {"messageOrdinal": i, "chunkOrdinal": i % 2}
        refs.append(
            {
                "range": {"start": start},
                "knowledgeType": "entity",
                "knowledge": {"name": "Porto" if i % 2 == 0 else "boats", "type": ["place"]},
            }
        )
        refs.append(
            {"range": {"start": start}, "knowledgeType": "topic", "knowledge": {"text": f"t{i}"}}
        )
    refs.insert(
        5, {"range": {"start": {"messageOrdinal": 3}}, "knowledgeType": "mood", "knowledge": {}}
    )
    index = {"items": [{"term": "porto", "semanticRefOrdinals": [{"semanticRefOrdinal": 0}]}]}
    parts: list[tuple[str, object]] = [("messages", messages), ("semanticRefs", refs)]
    return dict(
        [
            ("nameTag", "ep"),
            *(reversed(parts) if refs_first else parts),
            ("tags", ["x", "y"]),
            ("semanticIndexData", index),
            ("fileHeader", {"version": "0.2"}),
        ]
    )


@pytest.mark.parametrize("refs_first", [False, True])
def test_a_typeagent_index_is_streamed_and_reads_as_when_loaded_whole(
    tmp_path: Path, refs_first: bool
) -> None:
    """A TypeAgent index is checked in a walk that holds one message or ref at a time;
    its refs are kept on disk and come back per message: the same messages, conversation,
    warnings and knowledge (spans included) as loading it whole, in the order of its refs
    within each message, whether the refs come before or after the messages."""
    from structrag.importers import StreamedSource, scan_source

    path = tmp_path / "ep_index_data.json"
    path.write_text(json.dumps(_typeagent_document(refs_first), indent=1))
    whole = load_source(path)
    streamed = scan_source(path)
    _same_as_whole(streamed, whole)
    assert isinstance(streamed, StreamedSource) and not isinstance(streamed.knowledge, list)
    assert len(streamed.knowledge) == len(whole.knowledge) == 24
    assert whole.warnings == [f"{path}: 1 semantic ref(s) of unknown kind skipped"]
    by_message = sorted(whole.knowledge, key=lambda r: int(r.message_id))
    read = [ref for m in streamed.iter_messages() for ref in streamed.knowledge.of(m)]
    assert read == by_message
    boats = next(r for r in read if r.message_id == "1" and r.span.start > 0)
    message = whole.messages[1]
    assert message.text[boats.span.start : boats.span.end] == "boats"
    assert whole.conversations[0].metadata["tags"] == ["x", "y"]


def test_a_streamed_typeagent_index_says_what_is_wrong_at_its_check(tmp_path: Path) -> None:
    """A ref whose message or chunk is not there, or whose ordinal is not a number, fails
    the check with the error loading the index whole gives; an index of no messages is
    read as one, as when loaded whole."""
    from structrag.importers import scan_source

    path = tmp_path / "ep_index_data.json"
    for refs_first in (False, True):
        for start in (
            {"messageOrdinal": 12},
            {"messageOrdinal": 2, "chunkOrdinal": 1},
            {"messageOrdinal": "2"},
            {"messageOrdinal": 3, "chunkOrdinal": -1},
        ):
            doc = _typeagent_document(refs_first)
            refs = doc["semanticRefs"]
            assert isinstance(refs, list)
            refs[7] = {**refs[7], "range": {"start": start}}
            path.write_text(json.dumps(doc))
            with pytest.raises(InputError) as whole:
                load_source(path)
            with pytest.raises(InputError) as streamed:
                scan_source(path)
            assert str(streamed.value) == str(whole.value)
            assert "semanticRefs[7].range" in str(streamed.value)
    path.write_text(json.dumps({"nameTag": "ep", "messages": [], "semanticRefs": []}))
    assert scan_source(path).count == load_source(path).count == 0  # empty, not an error


# -- JSON Lines are checked and read as a stream ---------------------------------------


def _streamed_lines() -> list[dict[str, object]]:
    return [
        {"id": "a1", "conversation": "a", "speaker": "Ana", "text": "Hi Bo", "time": "03/04/2023"},
        {"id": "b1", "conversation": "b", "speaker": "Cy", "text": "Hello", "time": "25/04/2023"},
        {"id": "a2", "conversation": "a", "speaker": "Bo", "text": "", "time": "someday"},
        {"id": "a1", "conversation": "a", "speaker": "Ana", "text": "Hi Bo", "time": "03/04/2023"},
        {"conversation": "b", "speaker": "Dee", "text": "Hey Cy", "role": "user"},
        {"id": "a3", "conversation": "a", "speaker": "system", "text": "Be brief."},
    ]


def test_a_streamed_jsonl_file_reads_as_the_same_messages_and_warnings(tmp_path: Path) -> None:
    """`scan_source` checks a JSON Lines file without keeping its messages and reads them
    again when asked; they and the warnings are what `load_source` gives (ids, ordinals,
    default recipients, day/month order, repeated copies left out, times not read)."""
    from structrag.importers import StreamedSource, scan_source

    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in _streamed_lines()) + "\n")
    whole = load_source(path)
    streamed = scan_source(path)
    assert isinstance(streamed, StreamedSource)
    assert streamed.sha256 == whole.sha256 and streamed.count == whole.count == 5
    assert streamed.conversations == whole.conversations
    assert streamed.warnings == whole.warnings
    assert any("repeats line 1" in w for w in whole.warnings)
    assert any("not understood" in w for w in whole.warnings)
    read = list(streamed.iter_messages())
    key = lambda m: (m.conversation, m.ordinal)  # noqa: E731
    assert sorted(read, key=key) == sorted(whole.messages, key=key)
    assert [m.id for m in read] == ["a1", "b1", "a2", "2", "a3"]  # file order
    first = next(m for m in read if m.id == "a1")
    assert first.recipients == ("Bo",) and first.timestamp == datetime(2023, 4, 3)


def _same_as_whole(streamed: object, whole: ParsedSource, fmt: str | None = None) -> None:
    """A streamed source gives what loading its input whole gives: format, hash, count,
    conversations, warnings and messages, on each reading."""
    from structrag.importers import StreamedSource

    assert isinstance(streamed, StreamedSource)
    assert (streamed.format, streamed.sha256, streamed.count) == (
        fmt or whole.format,
        whole.sha256,
        whole.count,
    )
    assert streamed.conversations == whole.conversations
    assert streamed.warnings == whole.warnings
    assert list(streamed.iter_messages()) == whole.messages
    assert list(streamed.iter_messages()) == whole.messages  # read again, the same


_TEXT_EXPORTS = Path(__file__).parent / "fixtures" / "exports"
_ODD_TEXTS = {
    # A header, a turn with a time, a multi-line turn with a blank line in it, a huge
    # turn, CR line ends, no end of line at the end.
    "labels.txt": "Episode 9\r\nANA: [00:00:01] hi\r\n\r\nmore of it\r\nBo: ok "
    + "x" * 100_050
    + "\r\nAna Souza: bye",
    # Month-first dates, settled by the last line; a date that does not exist.
    # An iOS export (it starts with a bracket, as JSON does), and a timed transcript.
    "ios.txt": "[12/03/2023, 14:02:05] Ana: hi\n[12/03/2023, 14:03:00] Bo: yes\n",
    "timed.txt": "[00:00:01] Ana Souza: hi\n[00:00:04] bo: yes\n",
    "month first.txt": "03/04/2023, 10:00 - Ana: hi\n"
    "04/31/2023, 10:01 - Bo: when?\n"
    "03/25/2023, 10:02 - Ana: then\nand a second line\n",
    # WebVTT with a dated header running into the first cue, voice tags, a NOTE, a cue
    # with no text, cues of one speaker merged, a cue with no blank line at the end.
    "dated.vtt": "\ufeffWEBVTT - 2023-05-01T10:00:00\nKind: captions\n"
    "00:00:01.000 --> 00:00:02.000\n<v Ana>Hi there</v>\n\nNOTE a note\n\n"
    "c2\n00:00:02.000 --> 00:00:03.000\n\nc3\n00:00:03.000 --> 00:00:04.500\n"
    "<v Ana>and more</v>\n\n00:00:05,000 --> 00:00:06,000 align:start\n"
    "Bo: yes\nsecond line",
    "header only.vtt": "WEBVTT\nLanguage: en\n\n\n\n1\n00:00:01.000 --> 00:00:02.000\nhi",
}


@pytest.mark.parametrize(
    "name",
    [
        "meetings/podcast episode 4.txt",
        "meetings/zoom transcript.txt",
        "meetings/garden committee otter.txt",
        "meetings/zoom chat.txt",
        "whatsapp/WhatsApp Chat with Allotment crew.txt",
        "whatsapp/ambiguous dates.txt",
        "whatsapp/WhatsApp Chat - Porto trip/_chat.txt",
        "meetings/board call.vtt",
        *_ODD_TEXTS,
    ],
)
def test_a_streamed_transcript_or_whatsapp_export_reads_as_when_loaded_whole(
    tmp_path: Path, name: str
) -> None:
    """Transcripts, WebVTT and WhatsApp exports are checked and read line by line: the
    messages, the conversation (header, events, day/month order) and the warnings are what
    loading the file whole gives."""
    from structrag.importers import scan_source

    if name in _ODD_TEXTS:
        path = tmp_path / name
        path.write_bytes(_ODD_TEXTS[name].encode())
    else:
        path = _TEXT_EXPORTS / name
    whole = load_source(path)
    streamed = scan_source(path)
    _same_as_whole(streamed, whole)


@pytest.mark.parametrize("name", ["slack_export", "slack_export/general", "slack_export/seed-swap"])
def test_a_slack_export_is_checked_and_read_one_channel_at_a_time(
    tmp_path: Path, name: str
) -> None:
    """A Slack export folder comes back as a stream that reads one channel at a time; what
    it gives is what loading it whole gives. An export whose files change after the check
    says so when it is read (the ingest then checks it again)."""
    from structrag.importers import SourceChanged, scan_source

    whole = load_source(_TEXT_EXPORTS / name)
    streamed = scan_source(_TEXT_EXPORTS / name)
    _same_as_whole(streamed, whole, "slack")
    export = tmp_path / "export"
    shutil.copytree(_TEXT_EXPORTS / "slack_export", export)
    streamed = scan_source(export)
    day = export / "general" / "2023-03-13.json"
    day.write_text(day.read_text().replace("a", "b", 1))
    with pytest.raises(SourceChanged):
        list(streamed.iter_messages())
    day.write_text("[{")
    with pytest.raises(SourceChanged):
        list(streamed.iter_messages())
    with pytest.raises(InputError, match=r"2023-03-13\.json"):
        scan_source(export)


def test_a_streamed_text_export_says_what_is_wrong_at_its_check(tmp_path: Path) -> None:
    from structrag.importers import scan_source

    chat = tmp_path / "chat.txt"
    chat.write_text("12/03/2023, 14:02 - Ana: hi\n", encoding="utf-8")
    chat.write_bytes(b"hello there\n" + chat.read_bytes())
    with pytest.raises(InputError, match="line 1"):
        scan_source(chat, format="whatsapp")
    chat.write_bytes(b"12/03/2023, 14:02 - Ana: caf\xe9\n")
    with pytest.raises(InputError, match="line 1") as info:
        scan_source(chat)
    assert "not valid utf-8" in str(info.value)
    chat.write_text("12/03/2023, 14:02 - Ana: <Media omitted>\n", encoding="utf-8")
    with pytest.raises(InputError, match="only system lines"):
        scan_source(chat)
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\nwith no speakers\n", encoding="utf-8")
    with pytest.raises(InputError, match="no 'SPEAKER: text' turns"):
        scan_source(notes)
    mail = tmp_path / "mail.txt"
    mail.write_text("From: ana@example.org\nTo: bo@example.org\nSubject: hi\n\nBody\n")
    with pytest.raises(InputError, match="this is an email"):
        scan_source(mail, format="transcript")
    assert scan_source(mail).format == "email"


def test_a_streamed_jsonl_file_names_the_bad_line_at_its_check(tmp_path: Path) -> None:
    from structrag.importers import scan_source

    path = tmp_path / "chats.jsonl"
    lines = [json.dumps(line) for line in _streamed_lines()]
    path.write_text("\n".join([*lines[:2], '{"speaker": "Ana", "text": 5}', *lines[2:]]))
    with pytest.raises(InputError, match="line 3") as info:
        scan_source(path)
    assert "must be a string" in str(info.value)
    path.write_text("\n".join([*lines, '{"speaker": "Ana", "text": "hi"']))
    with pytest.raises(InputError, match="truncated"):
        scan_source(path)
    changed = {**_streamed_lines()[0], "text": "Bye Bo"}
    path.write_text("\n".join([*lines, json.dumps(changed)]))
    with pytest.raises(InputError, match="used twice") as info:
        scan_source(path)
    assert "line 7" in str(info.value) and "first at line 1" in str(info.value)


# -- JSON documents are checked and read as a stream -----------------------------------

_ODD_DOCUMENTS: dict[str, object] = {
    # One conversation as a list; repeated and conflicting-free copies, dates settled
    # month-first by one value, a time not understood, an empty message, a system turn.
    "list.json": [
        {"id": 1, "speaker": "Ana", "text": "Hi Bo", "time": "03/04/2023"},
        {"id": 2, "speaker": "Bo", "text": "", "time": "04/25/2023"},
        {"id": 1, "speaker": "Ana", "text": "Hi Bo", "time": "03/04/2023"},
        {"speaker": "system", "text": "Be brief.", "time": "someday"},
        {"speaker": {"name": "Cy"}, "content": [{"type": "text", "text": "hey"}]},
    ],
    # The conversation's id and name come after its messages.
    "messages.json": {
        "messages": [{"speaker": "Ana", "text": "Hi"}, {"speaker": "Bo", "text": "Hey"}],
        "id": "chat-7",
        "name": "Chat seven",
    },
    # Several conversations, their ids (one missing) after their messages.
    "conversations.json": {
        "conversations": [
            {"messages": [{"speaker": "Ana", "text": "x" * 100_050}], "id": "a", "name": "A"},
            {"messages": [{"speaker": "Bo", "text": "Hi"}, {"speaker": "Cy", "text": "Yo"}]},
            {"id": 3, "messages": []},
            {"id": "d", "messages": [{"speaker": "Di", "text": "Hi", "time": 1.7e9}]},
        ]
    },
    # A JSON document in a text file, pretty-printed.
    "export.txt": [{"speaker": "Ana", "text": "Hi\u2028there \U0001f600"}],
}


def _locomo_document() -> list[dict[str, object]]:
    def session(n: int) -> list[dict[str, str]]:
        return [
            {"speaker": "Ana", "dia_id": f"D{n}:1", "text": f"Session {n} hello"},
            {"speaker": "Bo", "dia_id": f"D{n}:2", "text": "Hi!", "blip_caption": "a cat"},
        ]

    return [
        {
            "sample_id": f"s{i}",
            "conversation": {
                "speaker_a": "Ana",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": session(1),
                "session_2_date_time": "2:10 pm on 9 May, 2023",
                "session_2": session(2),
            },
            "qa": [],
        }
        for i in range(3)
    ]


@pytest.mark.parametrize(
    "name",
    [
        "json/family group.json",
        "chatgpt/conversations.json",
        "discord/Astronomy Club - observing [1080000000000000001].json",
        "locomo.json",
        *_ODD_DOCUMENTS,
    ],
)
def test_a_json_document_is_streamed_and_reads_as_when_loaded_whole(
    tmp_path: Path, name: str
) -> None:
    """A JSON document (generic messages in its three shapes, Discord and ChatGPT exports,
    LoCoMo) is
    checked in a walk that holds one message (or chat) at a time and read again when
    written: the format, hash, messages, conversations and warnings are what loading it
    whole gives."""
    from structrag.importers import scan_source

    if name == "locomo.json":
        path = tmp_path / name
        path.write_text(json.dumps(_locomo_document()))
    elif name in _ODD_DOCUMENTS:
        path = tmp_path / name
        path.write_text(json.dumps(_ODD_DOCUMENTS[name], indent=1, ensure_ascii=False))
    else:
        path = _TEXT_EXPORTS / name
    whole = load_source(path)
    streamed = scan_source(path)
    _same_as_whole(streamed, whole)


def test_the_json_stream_decodes_what_json_loads_does(tmp_path: Path) -> None:
    """Whatever the pieces the file is read in, the values the walk gives rebuild the
    document json.loads gives; a broken document fails at the line and column (and with
    the hint) that parse_json names."""
    import random

    from structrag.importers.base import parse_json
    from structrag.importers.json_stream import ARRAY, OBJECT, JsonStream

    def rebuild(stream: JsonStream) -> object:
        nodes: dict[tuple[object, ...], object] = {}
        for event in stream:
            value = [] if event.value is ARRAY else {} if event.value is OBJECT else event.value
            if event.path:
                parent = nodes[event.path[:-1]]
                if isinstance(parent, list):
                    parent.append(value)
                else:
                    assert isinstance(parent, dict)
                    parent[event.path[-1]] = value
            nodes[event.path] = value
        return nodes[()]

    leaves = [1, -2.5, 1e30, 12345678901234567890, 'é😀\n"x', "\u2028", True, None, ""]
    rng = random.Random(7)

    def document(depth: int = 0) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.7:
            return [document(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{i}é": document(depth + 1) for i in range(rng.randint(0, 4))}

    path = tmp_path / "doc.json"
    for _ in range(150):
        doc = document()
        text = json.dumps(doc, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        path.write_text(text, encoding="utf-8")
        for chunk in (1, 5, 4096):
            assert rebuild(JsonStream(path, lambda at, c: rng.random() < 0.7, chunk=chunk)) == doc
        cut = rng.randrange(1, len(text) + 1)
        bad = text[:cut] + rng.choice(["", ",", "]", "x", ":"])
        path.write_text(bad, encoding="utf-8")
        try:
            expected = parse_json(path, bad)
        except InputError as exc:
            with pytest.raises(InputError) as info:
                rebuild(JsonStream(path, lambda at, c: True, chunk=3))
            got = info.value
            assert (got.detail, got.line, got.column, got.hint) == (
                exc.detail,
                exc.line,
                exc.column,
                exc.hint,
            ), bad
        else:
            assert rebuild(JsonStream(path, lambda at, c: True, chunk=3)) == expected


def test_a_streamed_json_document_says_what_is_wrong_at_its_check(tmp_path: Path) -> None:
    """A bad message, bad JSON, a truncated file and a conflicting id fail at the check
    with the error loading the file whole gives; a text file that merely starts with a
    bracket is a transcript, as detection says."""
    from structrag.importers import scan_source

    path = tmp_path / "chat.json"
    good = [{"id": i, "speaker": "Ana", "text": f"hi {i}"} for i in range(40)]
    bad_docs = [
        [*good, {"speaker": "Ana", "text": 5}],
        {"conversations": [{"id": "a", "messages": good}, {"id": "b", "messages": 3}]},
        [*good, {"id": 3, "speaker": "Ana", "text": "other"}],
    ]
    for doc in bad_docs:
        path.write_text(json.dumps(doc, indent=2))
        with pytest.raises(InputError) as whole:
            load_source(path)
        with pytest.raises(InputError) as streamed:
            scan_source(path)
        assert str(streamed.value) == str(whole.value)
    text = json.dumps(good, indent=2)
    for broken in (text[: len(text) // 2], text.replace("}", "]", 7)):
        path.write_text(broken)
        with pytest.raises(InputError) as whole:
            load_source(path)
        with pytest.raises(InputError) as streamed:
            scan_source(path)
        assert str(streamed.value) == str(whole.value)
    path.write_text(text[: text.rindex("}")])
    with pytest.raises(InputError, match="truncated"):
        scan_source(path)
    notes = tmp_path / "notes.txt"
    notes.write_text("[Intro music]\nANA: welcome\nBO: thanks\n")
    assert scan_source(notes).format == load_source(notes).format == "transcript"


@pytest.mark.parametrize("doc", ["list", "discord"])
def test_a_streamed_json_document_that_changes_after_its_check_says_so(
    tmp_path: Path, doc: str
) -> None:
    """Read again after its check, a JSON document whose bytes changed raises
    SourceChanged (the ingest then checks it again), also when the change broke it."""
    from structrag.importers import SourceChanged, StreamedSource, scan_source

    path = tmp_path / "chat.json"
    if doc == "list":
        path.write_text(json.dumps([{"speaker": "Ana", "text": f"hi {i}"} for i in range(9)]))
    else:
        (export,) = (_TEXT_EXPORTS / "discord").glob("*.json")
        shutil.copy(export, path)
    streamed = scan_source(path)
    assert isinstance(streamed, StreamedSource) and streamed.format == (
        "json" if doc == "list" else "discord"
    )
    text = path.read_text()
    path.write_text(text.replace("hi", "ho", 1) if doc == "list" else text.replace("a", "b", 1))
    with pytest.raises(SourceChanged):
        list(streamed.iter_messages())
    path.write_text(text[: len(text) // 2])
    with pytest.raises(SourceChanged):
        list(streamed.iter_messages())


def _mbox(*mails: tuple[str, str, str, str]) -> bytes:
    out = b"\xef\xbb\xbf\r\n\n"  # a BOM and blank lines before the first From line
    for n, (who, date, links, body) in enumerate(mails, start=1):
        out += (
            f"From {who}@example.org Tue Mar 14 08:12:00 2023\n"
            f"From: {who.title()} <{who}@example.org>\nTo: Ana <ana@example.org>, "
            f"Bo <bo@example.org>\nSubject: Re: Seeds\n"
            + (f"Date: {date}\n" if date else "")
            + f"Message-ID: <m{n % 4}@example.org>\n{links}\n{body}\n\n"
        ).encode()
    return out


_MAILBOXES = {
    "garden": None,
    "board-meeting": None,
    "odd": _mbox(
        ("ana", "Tue, 14 Mar 2023 09:12:00 +0100", "", "Hi all\n>From the shop: seeds."),
        ("bo", "Wed, 15 Mar 2023 09:12:00 +0100", "In-Reply-To: <m1@example.org>\n", "ok"),
        ("cy", "", "", "x" * 100_050),
        ("di", "someday", "References: <m9@example.org>\n", "   "),
        ("ana", "Tue, 14 Mar 2023 09:12:00 +0100", "", "Hi all\n>From the shop: seeds."),
    ),
}


@pytest.mark.parametrize("name", list(_MAILBOXES))
@pytest.mark.parametrize("conversation", [None, "garden-mail"])
def test_a_mailbox_is_streamed_and_reads_as_when_loaded_whole(
    tmp_path: Path, name: str, conversation: str | None
) -> None:
    """An mbox or a folder of .eml is checked one message at a time (keeping what threads
    each) and read
    again thread by thread: the threads, messages (mboxrd escapes undone, dates, empty
    and huge ones) and warnings are what loading it whole gives; a changed mailbox says
    so when it is read."""
    from structrag.importers import LoadOptions, SourceChanged, scan_source

    path = tmp_path / "mail.mbox"
    data = _MAILBOXES[name]
    if name == "board-meeting":  # a folder of .eml files
        path = tmp_path / name
        shutil.copytree(_TEXT_EXPORTS / "email" / name, path)
    else:
        path.write_bytes(data or (_TEXT_EXPORTS / "email" / "garden.mbox").read_bytes())
    options = LoadOptions(conversation=conversation)
    whole = load_source(path, options=options)
    streamed = scan_source(path, options=options)
    _same_as_whole(streamed, whole, "email")
    changed = min(path.glob("*.eml")) if path.is_dir() else path
    changed.write_bytes(changed.read_bytes().replace(b"Subject:", b"X-Subject:", 1))
    with pytest.raises(SourceChanged):
        list(streamed.iter_messages())


def _eml(sender: str, to: str, msg_id: str | None, date: str, extra: str = "") -> str:
    ident = f"Message-ID: <{msg_id}>\n" if msg_id else ""
    return (
        f"From: {sender}\nTo: {to}\n{extra}Subject: Plot 12\n"
        f"Date: Tue, 14 Mar 2023 {date} +0100\n{ident}\nAbout plot 12.\n"
    )


_NAMED_MAILS = {
    # Jürgen writes to a bare ana@ and copies cy@, whom nobody names
    "1.eml": _eml(
        "=?UTF-8?B?SsO8cmdlbiBNw7xsbGVy?= <jm@example.de>",
        "ana@example.com",
        "a1@example.de",
        "09:00:00",
        "Cc: cy@example.org\n",
    ),
    # Ana answers a bare jm@ (upper case); Bo calls her plain "Ana"
    "2.eml": _eml('"Souza, Ana" <ana@example.com>', "JM@example.de", "b1@example.com", "10:00:00"),
    "3.eml": _eml("Bo <bo@example.org>", "Ana <ana@example.com>", "c1@example.org", "11:00:00"),
    # Ana from her phone: a bare From, and no Message-ID (its id is made from the sender)
    "4.eml": _eml("ana@example.com", "bo@example.org", None, "12:00:00"),
}


@pytest.mark.parametrize("layout", ["folder", "mbox"])
def test_bare_addresses_take_the_name_they_go_by_in_the_same_input(
    tmp_path: Path, layout: str
) -> None:
    """An address without a name is the person that address is named elsewhere in the
    mailbox (the name its owner signs with in From first), as speaker and as recipient,
    loaded whole or streamed; one never named stays an address; ids, threads and the
    address metadata are what the mails alone give."""
    from structrag.importers import scan_source

    if layout == "folder":
        path = tmp_path / "mail"
        path.mkdir()
        for name, text in _NAMED_MAILS.items():
            (path / name).write_text(text, encoding="utf-8")
    else:
        path = tmp_path / "mail.mbox"
        path.write_text(
            "".join(f"From x Tue Mar 14 08:00:00 2023\n{t}\n" for t in _NAMED_MAILS.values()),
            encoding="utf-8",
        )
    alone = tmp_path / "alone.eml"
    alone.write_text(_NAMED_MAILS["4.eml"], encoding="utf-8")
    (phone,) = load_source(alone).messages
    assert phone.speaker == "ana@example.com"  # nothing names the address in its own file
    whole = load_source(path)
    streamed = scan_source(path)
    assert isinstance(streamed, StreamedSource)
    for messages in (whole.messages, list(streamed.iter_messages())):
        got = {m.id: (m.speaker, m.recipients) for m in messages}
        assert got == {
            "a1@example.de": ("Jürgen Müller", ("Ana Souza", "cy@example.org")),
            "b1@example.com": ("Ana Souza", ("Jürgen Müller",)),
            "c1@example.org": ("Bo", ("Ana",)),  # a name a message gives is kept
            phone.id: ("Ana Souza", ("Bo",)),
        }
        assert [m.metadata["to"] for m in messages if m.id == "a1@example.de"] == [
            ["ana@example.com"]
        ]
    assert {c.id for c in whole.conversations} == {
        "email:a1@example.de",
        "email:b1@example.com",
        "email:c1@example.org",
        f"email:{phone.id}",
    }
    people = {c.id: c.metadata["participants"] for c in streamed.conversations}
    assert people["email:b1@example.com"] == ["Ana Souza"]
    assert people[f"email:{phone.id}"] == ["Ana Souza"]


def test_whatsapp_typed_messages_that_read_like_its_own_lines_are_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "Porto trip"
    folder.mkdir()
    chat = folder / "_chat.txt"
    chat.write_text(
        "[28/12/2023, 20:00:00] Ana: The appendix of the contract document omitted\n"
        "[28/12/2023, 20:01:00] Bo: Video call tomorrow at 5?\n"
        "[28/12/2023, 20:02:00] Ana: Voice call quality was terrible today\n"
        "[28/12/2023, 20:03:00] Bo: \u200eMissed voice call, \u200eTap to call back\n"
        "[28/12/2023, 20:04:00] Ana: \u200eVoice call, \u200e12 min\n"
        "[28/12/2023, 20:05:00] Bo: \u200eimage omitted\n"
        "[28/12/2023, 20:06:00] Ana: \u200ebudget.pdf \u2022 \u200e3 pages"
        " \u200edocument omitted\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(folder)  # "_chat.txt" typed in its folder: named by the folder
    source = load_source(Path("_chat.txt"))
    assert [c.id for c in source.conversations] == ["Porto trip"]
    assert [m.text for m in source.messages] == [
        "The appendix of the contract document omitted",
        "Video call tomorrow at 5?",
        "Voice call quality was terrible today",
    ]
    counts = source.conversations[0].metadata["event_counts"]
    assert counts == {"call": 2, "media": 2}
    # a long line of bullets is read at once (a pattern for documents backtracked badly)
    import time

    bullets = "[28/12/2023, 20:07:00] Bo: List in notes.txt" + " • item" * 40 + " enjoy!\n"
    chat.write_text(chat.read_text(encoding="utf-8") + bullets, encoding="utf-8")
    started = time.perf_counter()
    assert load_source(Path("_chat.txt")).messages[-1].text.endswith("enjoy!")
    assert time.perf_counter() - started < 5


def test_a_json_list_splits_by_each_message_conversation(tmp_path: Path) -> None:
    rows = [("alpha", "Ana", "in alpha"), ("beta", "Bo", "in beta"), ("alpha", "Bo", "again")]
    messages = [{"conversation": c, "speaker": s, "text": t} for c, s, t in rows]
    for name, data in (("list.json", messages), ("doc.json", {"messages": messages})):
        path = tmp_path / name
        path.write_text(json.dumps(data), encoding="utf-8")
        for source in (load_source(path), _streamed(path)):
            found = [(m.conversation, m.id, m.text) for m in source.iter_messages()]
            assert sorted(found) == [
                ("alpha", "1", "in alpha"),
                ("alpha", "2", "again"),
                ("beta", "1", "in beta"),
            ]
        # --conversation names one for the whole file
        whole = load_source(path, options=LoadOptions(conversation="all"))
        assert {m.conversation for m in whole.messages} == {"all"}


def _streamed(path: Path) -> StreamedSource:
    from structrag.importers import scan_source

    source = scan_source(path)
    assert isinstance(source, StreamedSource)  # the walk of a document, not a load
    return source


def test_openai_style_messages_name_their_speaker_and_keep_image_parts(tmp_path: Path) -> None:
    path = tmp_path / "oa.jsonl"
    lines = [
        {
            "role": "user",
            "name": "Carla",
            "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}},
            ],
        },
        {"role": "assistant", "content": "A cat."},
        {"role": "tool", "name": "lookup", "content": "result"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    messages = load_source(path).messages
    assert [m.speaker for m in messages] == ["Carla", "assistant", "tool"]
    assert messages[0].text == "What is in this image?\n[image]"
    assert messages[0].metadata["role"] == "user"
    assert messages[2].metadata["name"] == "lookup"


def test_a_message_without_an_id_never_takes_another_ones(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"id": "2", "speaker": "Ana", "text": "explicit id two"}\n'
        '{"speaker": "Bo", "text": "no id"}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="the message at line 2 has no id") as info:
        load_source(path)
    assert "'2', the id of the message at line 1" in str(info.value)
    path.write_text(
        '{"speaker": "Bo", "text": "no id"}\n{"id": "1", "speaker": "Ana", "text": "one"}\n',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="the message at line 1 has no id"):
        load_source(path)


def test_words_after_a_sign_off_that_are_no_signature_stay_in_the_text() -> None:
    from structrag.importers.mail import split_reply

    text, _, signature = split_reply(
        "Hi Ana,\nGot the keys from the landlord.\nThanks!\nThe door code is 4512\nBo"
    )
    assert "The door code is 4512" in text and not signature
    text, _, signature = split_reply(
        "Hi Ana,\nGot the keys.\nThanks!\nBo Chen\nHead of Product, Acme Corp\n+1 555 1234"
    )
    assert text == "Hi Ana,\nGot the keys."
    assert signature == "Thanks!\nBo Chen\nHead of Product, Acme Corp\n+1 555 1234"


def test_an_index_inside_the_folder_ingested_is_no_input(tmp_path: Path) -> None:
    """`structrag ingest . --db idx`: the index's own files are not reported as left out."""
    from structrag import Index
    from structrag.importers import expand_inputs

    (tmp_path / "chat.jsonl").write_text('{"id": "1", "speaker": "Ana", "text": "Hi there."}\n')
    with Index(tmp_path / "idx") as index:
        index.ingest([tmp_path])
    inputs = expand_inputs([tmp_path])
    assert inputs.paths == [tmp_path / "chat.jsonl"]
    assert inputs.skipped == []
