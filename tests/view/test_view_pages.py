"""Each kind of page of ``cfkit view`` as a researcher reads it, on a study's awkward workspace (support.view_study):
marks that do not rest on colour alone, a legend under each table with marks, no empty separator in a reply's
line, a filter's words as they are spelt, every link of the export leading to a file, and a pairs page that never
scrolls sideways on a phone.
"""

from __future__ import annotations

import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from support import view_study
from support.workspace import MINI


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    return view_study.exported(tmp_path_factory.mktemp("view-pages"))[1]


def _sections(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<section class="pair" id="([^"]+)">(.*?)</section>', page, re.S)


def test_each_pairs_answer_says_right_or_wrong_in_a_mark_with_its_legend(site):
    # Blue and orange alone said right and wrong: a reader who cannot tell them apart, or a print in grey, read
    # nothing. Each counted answer carries the case page's mark; the gold heads its column; a legend follows.
    sections = _sections((site / "pairs.html").read_text())
    assert {pair for pair, _ in sections} == {"EX01", "EX02", "EX03"}
    states = set()
    for pair, section in sections:
        table, after = section.split('<table class="answers">', 1)[1].split("</table>", 1)
        assert re.search(r"<th>Original \(gold (Yes|No)\)</th><th>Edit \(gold (Yes|No)\)</th>", table), pair
        for state, text in re.findall(r'<td class="([^"]*)">([^<]*)</td>', table):
            states.add(state)
            text = html.unescape(text)
            if state == "ok":
                assert text.endswith(" ✓"), (pair, text)
            elif state == "bad":
                assert text.endswith(" ✗") or text.endswith(": counted wrong)"), (pair, text)
            else:  # stale, left out: grey, and their words say it
                assert "✓" not in text and "✗" not in text, (pair, text)
        legend = re.match(r'\s*</div>\s*<p class="caption key">(.*?)</p>', after, re.S)
        assert legend is not None, pair
        assert '<span class="ok">✓</span>' in legend.group(1) and '<span class="bad">✗</span>' in legend.group(1)
        # The key explains the words and the grey only where a box of its table has them.
        assert ("counted wrong" in legend.group(1)) == ("counted wrong" in table), pair
        assert ("in grey" in legend.group(1)) == bool(re.search(r'<td class="(stale|left-out|absent)">', table)), pair
    assert {"ok", "bad", "stale", "left-out"} <= states


def test_a_replys_line_on_the_case_page_has_no_empty_separator(site):
    # A failed request has no raw reply: its line read 'HTTP 500 … overloaded · · run …'.
    for path in sorted(site.glob("case-*.html")):
        answers = path.read_text().split('<table id="answers" class="cards">', 1)[-1]
        lines = [line for line in re.findall(r"<small>(.*?)</small></td>", answers, re.S) if "run <code>" in line]
        assert lines and len(lines) == answers.count("<tr class="), path.name  # one a reply
        for line in lines:
            words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", line)).strip()
            assert "· ·" not in words and not words.startswith("·"), (path.name, words)
            assert re.search(r"(^|· )run \S+$", words), (path.name, words)
    failed = (site / "case-MX01.html").read_text()
    assert "overloaded · run <code>" in failed


def test_a_filter_says_cfkit_as_it_is_spelt(site):
    page = (site / "cases-peer-disagrees-1.html").read_text()
    meaning = re.search(r'<p class="filter-meaning">(.*?)</p>', page, re.S).group(1)
    assert "cfkit&#39;s reading" in meaning and "Cfkit" not in meaning


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.targets.extend(found[k] for k in ("href", "src") if found.get(k))
        if found.get("id"):
            self.ids.add(found["id"])


def test_every_link_of_the_export_leads_to_a_file_in_it(site):
    pages = {}
    for path in site.glob("*.html"):
        pages[path.name] = _Links()
        pages[path.name].feed(path.read_text())
    broken = []
    for name, links in sorted(pages.items()):
        for target in links.targets:
            parts = urlsplit(target)
            path = unquote(parts.path) or name
            if parts.scheme or parts.netloc or not (site / path).is_file():
                broken.append((name, target))
            elif parts.fragment and path.endswith(".html") and parts.fragment not in pages[path].ids:
                broken.append((name, target))
    assert len(pages) > 10 and broken == []


def test_the_pairs_page_never_scrolls_sideways_on_a_phone_with_a_long_model_id(site, browser, tmp_path):
    # A model id with nowhere to break (a fine-tuned checkpoint's) widened the answers table past a phone's
    # window, and the whole page scrolled sideways; the table scrolls in its own box, as every other table does.
    long = "hf:Qwen/Qwen2.5-VL-72B-Instruct-AWQ_finetuned_checkpoint_epoch3"
    for path in site.iterdir():
        if path.name == "pairs.html":
            (tmp_path / path.name).write_text(path.read_text().replace(view_study.MODEL, long))
        elif path.suffix in (".css", ".png"):
            shutil.copy(path, tmp_path / path.name)
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto((tmp_path / "pairs.html").as_uri())
    assert page.locator("table.answers", has_text=long).count() == 3
    width = page.evaluate("document.documentElement.scrollWidth")
    boxes = page.locator("div.scroll:has(table.answers)").evaluate_all("els => els.map(e => e.clientWidth)")
    page.close()
    assert width <= 390 and len(boxes) == 3 and max(boxes) <= 390
