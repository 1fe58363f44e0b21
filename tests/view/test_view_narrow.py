"""Every page of ``cfkit view`` fits a phone's window when what it names is long.

A workspace under a long folder path, a case id of 63 characters with nowhere to break, a question holding a
long URL, runs under long model names (a replay, a served model whose requests fail with a long error and whose
replies run on, a model whose server never answers) and a study whose file and name are long: at 390 px the study
page and the long case's page scrolled sideways (a heading holding the name), and the case list's long id pushed
its row's numbers out of sight. Tables scroll in their own box; the page itself never does.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from support.chat_api_server import ChatServer, Scripted, answer_json, completion, error_body, user_text
from support.workspace import MINI, run_cli

pytestmark = pytest.mark.timeout(300)

FOLDER = "a_research_folder_named_for_the_counterfactual_probing_experiments_of_2026_with_no_spaces"
CASE = "MX08_hubble_extreme_deep_field_reused_with_a_long_identifier_ok"  # 63 characters: a case id may have 64
URL = "https://example.org/a/very/long/url/that/has/no/spaces/anywhere/in/it/at/all/and/keeps/going/on_and_on.html"
LLAMA = "openai:meta-llama/Llama-3.2-90B-Vision-Instruct-Turbo"
REPLAYED = "openai:Qwen/Qwen2.5-VL-72B-Instruct-AWQ_finetuned_checkpoint_epoch3"
ERROR = ("The request was rejected because the image payload exceeds the maximum allowed size for this deployment; see "
         "https://docs.example.org/errors/payload_too_large/image_inputs/limits_and_quotas_for_vision_models.html")
STUDY = "pilot_study_of_every_model_we_have_with_a_name_that_has_to_wrap_somewhere_on_a_phone"


def _served(body, n) -> Scripted:
    text = user_text(body)
    if "matcha" in text or URL in text:
        return Scripted(400, error_body(ERROR))
    return Scripted(body=completion("Thinking: " + "the_photo_shows_" * 30 + " " + answer_json("A", "x" * 200),
                                    model="meta-llama/Llama-3.2-90B-Vision-Instruct-Turbo-as-served"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _add_long_case(root: Path) -> None:
    cases = root / "cases.jsonl"
    case = json.loads(cases.read_text().splitlines()[0]) | {
        "id": CASE, "images": ["hubble_deep_field.jpg"], "question": f"Is this photo suitable for the page {URL} ?"}
    cases.write_text(cases.read_text() + json.dumps(case) + "\n")
    (root / "captions" / f"{CASE}.yaml").write_text(
        f"neutral: A black sky crowded with lights; see {URL} for more.\n"
        "evidence: Two bright points with spikes, Supercalifragilisticexpialidocious_pneumonoultramicroscopic.\n"
        "author: human\nreviewed: true\n")
    subset = root / "probes" / "modality-mini.txt"
    subset.write_text(subset.read_text() + CASE + "\n")


@pytest.fixture(scope="module")
def long_site(tmp_path_factory) -> tuple[Path, Path]:
    if not (MINI / "cfkit.toml").is_file():
        pytest.skip("examples/mini is not in this checkout")
    base = tmp_path_factory.mktemp("view-narrow")
    root = base / FOLDER / FOLDER.replace("research", "nested") / "ws"
    assert run_cli(["demo", "--output", str(root)]).exit_code == 0
    _add_long_case(root)
    cli = lambda *args: run_cli(["-w", str(root), *args], env={"OPENAI_API_KEY": "sk-test"})  # noqa: E731
    ran = cli("probe", "run", "-m", "baseline:random", "-s", "contextcanvas")
    assert ran.exit_code == 0, ran.stderr
    run_id = re.search(r"contextcanvas-baseline-random-[0-9a-f]+", ran.stdout + ran.stderr).group(0)
    exported = cli("runs", "export", run_id, "--format", "predictions")
    predictions = base / f"predictions_of_{REPLAYED.replace('/', '_').replace(':', '_')}.jsonl"
    predictions.write_text(exported.stdout.replace('"baseline:random"', json.dumps(REPLAYED)))
    replayed = cli("probe", "run", "-m", f"replay:{predictions}", "-s", "contextcanvas")
    assert replayed.exit_code == 0, (exported.stderr, replayed.stderr)
    dead = f"http://127.0.0.1:{_closed_port()}/v1/a/very/long/endpoint/path/that/never/answers/anything_at_all"
    folder = root / "studies_for_the_counterfactual_probing_paper_camera_ready_version_final"
    folder.mkdir()
    study = folder / "pilot_study_with_every_model_we_have_and_a_very_long_file_name.toml"
    with ChatServer(_served) as server:
        for suite in ("contextcanvas", "counterfactual"):
            ran = cli("probe", "run", "-m", LLAMA, "-s", suite, "--base-url", server.url, "-o", "max_retries=0")
            assert ran.exit_code == 1 and "payload_too_large" in ran.stderr, ran.stderr
        study.write_text(
            f"name = '{STUDY}'\n[models.majority]\nmodel = 'baseline:majority'\ngroup = 'baselines'\n"
            f"[models.llama]\nmodel = '{LLAMA}'\nendpoint = '{server.url}'\noptions = {{ max_retries = 0 }}\n"
            f"[models.offline]\nmodel = '{REPLAYED}_never_served'\nendpoint = '{dead}'\n[suites.contextcanvas]\n")
        assert cli("study", "run", str(study)).exit_code == 1
    site = base / "site"
    made = cli("view", "--study", str(study.relative_to(root)), "--export", str(site))
    assert made.exit_code == 0, made.stderr
    return root, site


def test_the_long_names_are_on_the_pages(long_site):
    root, site = long_site
    pages = {path.name: path.read_text() for path in site.glob("*.html")}
    assert all(str(root) in page for page in pages.values())
    assert f"case-{CASE}.html" in pages and CASE in pages["cases-all-1.html"] and URL in pages[f"case-{CASE}.html"]
    assert LLAMA in pages["index.html"] and REPLAYED in pages["index.html"] and REPLAYED in pages["report.html"]
    assert "payload_too_large" in pages["case-MX01.html"] and "the_photo_shows_" * 3 in pages["case-MX03.html"]
    assert STUDY in pages["study.html"] and "very_long_file_name.toml" in pages["study.html"]


@pytest.mark.parametrize("width", [390, 1280])
def test_no_page_scrolls_sideways_with_long_names(long_site, browser, width):
    _, site = long_site
    wide = []
    pages = sorted(site.glob("*.html"))
    assert len(pages) > 15
    page = browser.new_page(viewport={"width": width, "height": 844})
    for path in pages:
        page.goto(path.as_uri())
        scroll = page.evaluate("document.documentElement.scrollWidth")
        if scroll > width:
            wide.append((path.name, scroll))
    page.close()
    assert wide == []


def test_a_long_case_id_leaves_its_rows_numbers_in_sight_on_a_phone(long_site, browser):
    # The id had nowhere to break: its column took the whole width of the box, and every row's Right and Wrong
    # were out of sight to the right. It wraps in its cell now, as does a long URL in a question.
    _, site = long_site
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto((site / "cases-all-1.html").as_uri())
    box = page.locator("div.scroll:has(#cases)").evaluate("e => e.getBoundingClientRect().right")
    link = page.locator(f'#cases a[href="case-{CASE}.html"]').evaluate("e => e.getBoundingClientRect().right")
    right = page.locator("#cases tbody tr:last-child td.num").first.evaluate("e => e.getBoundingClientRect().right")
    page.close()
    assert link <= box and right <= box


RECORD_TABLES = {"index.html": "#runs", f"case-{CASE}.html": "#answers", "case-MX01.html": "#missing",
                 "study.html": "table.study-runs"}


def _cells(page, table):
    return page.locator(f"{table} tbody td").evaluate_all(
        """cells => cells.map(td => ({label: td.dataset.label, right: td.getBoundingClientRect().right,
            display: getComputedStyle(td).display, before: getComputedStyle(td, '::before').content,
            box: td.closest('div.scroll').getBoundingClientRect().right}))""")


def test_record_tables_show_every_column_on_a_phone_under_its_name(long_site, browser):
    # A table of records on a phone scrolled in its box, and what a reader looks for (a run's status, an answer's
    # reason, a study run's state) was the column out of sight to the right. Each row is now a block on a phone,
    # each cell under its column's name; on a desktop the table keeps its columns.
    _, site = long_site
    for width in (390, 1280):
        page = browser.new_page(viewport={"width": width, "height": 844})
        for name, table in RECORD_TABLES.items():
            page.goto((site / name).as_uri())
            headers = page.locator(f"{table} thead th").all_inner_texts()
            cells = _cells(page, table)
            assert cells and len(cells) % len(headers) == 0, (name, len(cells), headers)
            assert [c["label"] for c in cells[:len(headers)]] == [h.strip() for h in headers], name
            if width == 390:
                assert all(c["display"] == "block" and c["right"] <= c["box"] + 0.5 for c in cells), name
                assert all(c["before"] == f'"{c["label"]}: "' for c in cells), (name, cells[0]["before"])
            else:
                assert all(c["display"] == "table-cell" and c["before"] in ("none", "normal") for c in cells), name
        page.close()
