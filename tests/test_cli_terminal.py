"""Terminal escapes in data: control characters in a title, a chunk, a file name, a stored
question or answer never reach the terminal raw through the real CLI; they print as visible
escapes (`\\x1b`) and newlines stay newlines."""

from __future__ import annotations

import json
import re

from test_cli_markup import kb_with_one_doc_and_run, ragloop

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # write the clipboard
OSC0 = "\x1b]0;pwned\x1b\\"  # set the window title
CLEAR = "\x1b[2J\x1b[H"  # clear the screen
HIDDEN = "\x1b[8m"  # hide what follows
C1_CSI = "\x9b2J"  # the 8-bit CSI
NAME = f"esc{CLEAR}name.md"
DOC = (f"# Tamarind {OSC52} notes\n\n## Storage {OSC0}\n"
       f"The tamarind pods keep for a year {HIDDEN}in a dry cellar{C1_CSI}.\r\n"
       "Bidi \u202eoverride\u202c and a bell \x07 too.\n")
QUESTION = f"How long do tamarind pods keep? {OSC0}{CLEAR}"
# anything a terminal acts on: C0 but tab and newline, DEL, C1, bidi overrides
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_no_raw_controls(result) -> None:
    for stream in (result.stdout, result.stderr):
        assert not RAW.findall(stream), repr(stream)


def test_control_characters_in_data_print_as_visible_escapes(small_kb_template, tmp_path):
    folder, section, run_id = kb_with_one_doc_and_run(
        small_kb_template, tmp_path, NAME, DOC, QUESTION, f"A year. {OSC52}", f"single{HIDDEN}")
    kb_arg = ["--kb", str(folder)]

    listed = ragloop("docs", *kb_arg)
    assert listed.returncode == 0, listed.stderr
    assert_no_raw_controls(listed)
    assert "esc\\x1b[2J\\x1b[Hname.md" in listed.stdout
    assert "Tamarind \\x1b]52;c;ZWNobyBwd25lZA==\\x07 notes" in listed.stdout

    found = ragloop("search", "tamarind pods dry cellar", "--mode", "bm25", *kb_arg)
    assert found.returncode == 0, found.stderr
    assert_no_raw_controls(found)
    assert "\\x1b[8min a dry cellar\\x9b2J" in found.stdout

    shown = ragloop("section", NAME, section, *kb_arg)
    assert shown.returncode == 0, shown.stderr
    assert_no_raw_controls(shown)
    assert "Storage \\x1b]0;pwned\\x1b\\" in shown.stdout
    assert "cellar\\x9b2J.\nBidi \\u202eoverride\\u202c and a bell \\x07 too." in shown.stdout

    recent = ragloop("runs", *kb_arg)
    assert recent.returncode == 0, recent.stderr
    assert_no_raw_controls(recent)
    assert "How long do tamarind pods keep? \\x1b]0;pwned" in recent.stdout
    one = ragloop("runs", run_id, *kb_arg)
    assert one.returncode == 0, one.stderr
    assert_no_raw_controls(one)
    assert "A year. \\x1b]52;c;" in one.stdout

    asked = ragloop("ask", f"How long do tamarind pods keep? {OSC52}", "--route", "single",
                    *kb_arg)
    assert asked.returncode == 0, asked.stderr
    assert_no_raw_controls(asked)
    assert "tamarind" in asked.stdout.lower()

    # --json: C0 is escaped by JSON itself; DEL, C1 and bidi controls are escaped too, and the
    # data reads back unchanged
    as_json = ragloop("section", NAME, section, "--json", *kb_arg)
    assert as_json.returncode == 0, as_json.stderr
    assert_no_raw_controls(as_json)
    assert C1_CSI in json.loads(as_json.stdout)["text"]
