"""The HTML view of a program: self-contained, everything the program says escaped, its data
equal to the interpreter's, and, in a real headless browser (Debian's chromium through
selenium, where installed), hovering a token shows and highlights what each head reads."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import tpcore
from tpcore.analysis.html_view import page_data, program_html
from tpcore.analysis.program_figures import attention_maps
from tpcore.cli import main
from tpcore.programs import ir

pytestmark = pytest.mark.host_only("writes and opens HTML files on the host")

SORT_RUN = Path(__file__).resolve().parents[2] / "results" / "learn_sort"


@pytest.fixture(scope="module")
def program() -> ir.Program:
    return tpcore.load(SORT_RUN).program.ir


def _data(page: str) -> dict:
    text = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)[1]
    return json.loads(text)


def test_the_page_is_self_contained_and_its_data_are_the_programs(program):
    tokens = program.frame("d a c b".split())
    page = program_html(program, tokens)
    assert page.startswith("<!DOCTYPE html>") and not re.search(r"(src|href)=|https?://", page)
    data = _data(page)
    maps = attention_maps(program, tokens)
    heads = [m for m in program.modules if isinstance(m, ir.Head)]
    assert [h["name"] for h in data["heads"]] == [h.name for h in heads]
    for h in data["heads"]:
        np.testing.assert_array_equal(h["attention"], maps[h["name"]])
        assert [r["keys"] for r in h["reads"]] == [list(np.flatnonzero(row))
                                                   for row in maps[h["name"]]]
    assert data["prediction"][1:5] == tpcore.load(SORT_RUN).program.run("d a c b")
    assert page.count("<svg") == 2 * len(heads)


def test_what_a_program_says_enters_the_page_as_text(program):
    d = ir.to_dict(program)
    evil = "</script><script>alert(1)</script>"
    d["classifier"]["classes"] = [evil if c == "a" else c for c in d["classifier"]["classes"]]
    hostile = ir.from_dict(d)
    page = program_html(hostile, hostile.frame("d a c b".split()))
    assert page.count("<script") == 2 and "alert(1)</script>" not in page
    assert evil in json.dumps(_data(page))                          # the data keep the label


def test_program_show_writes_the_page(tmp_path, capsys):
    out = tmp_path / "view.html"
    assert main(["program", "show", str(SORT_RUN), "--no-source", "--html", str(out),
                 "--input", "e d a"]) == 0
    assert f"# page: {out}" in capsys.readouterr().out
    assert _data(out.read_text())["tokens"] == ["<s>", "e", "d", "a", "</s>"]
    assert main(["program", "show", str(SORT_RUN), "--html", str(tmp_path / "x.html"),
                 "--input", "e z"]) == 2
    assert "token 'z' (position 1)" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_the_python_api_writes_the_same_page(program, tmp_path):
    prog = tpcore.load(SORT_RUN).program
    path = prog.html(tmp_path / "p.html", "d a c b")
    assert path.read_text() == program_html(program, program.frame("d a c b".split()))
    with pytest.raises(tpcore.TpcoreError, match="token 'z'"):
        prog.html(tmp_path / "q.html", ["d", "z"])
    assert not (tmp_path / "q.html").exists()


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (apt install chromium "
                    "chromium-driver)")
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium")
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


def test_hovering_a_token_in_a_real_browser(program, tmp_path):
    tokens = program.frame("d a c b".split())
    path = tmp_path / "view.html"
    path.write_text(program_html(program, tokens))
    browser = _browser()
    try:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By

        browser.get(path.as_uri())
        before = browser.get_screenshot_as_png()
        span = browser.find_elements(By.CSS_SELECTOR, ".tokens span")[2]
        ActionChains(browser).move_to_element(span).perform()
        after = browser.get_screenshot_as_png()
        lines = browser.find_element(By.ID, "reads").text.splitlines()
        lit = browser.find_elements(By.CSS_SELECTOR, "rect.on")
        assert "on" in span.get_attribute("class")
    finally:
        browser.quit()
    data = page_data(program, tokens)
    assert lines[0] == f"position 2: a -> {data['prediction'][2]}"
    first = data["heads"][0]
    assert lines[1] == (f"{first['name']}: keys {', '.join(map(str, first['reads'][2]['keys']))}"
                        f" -> {first['value']} {first['reads'][2]['value']} -> "
                        f"{first['output']} {first['reads'][2]['output']}")
    assert len(lines) == 1 + len(data["heads"])
    assert len(lit) == sum(len(h["reads"][2]["keys"]) for h in data["heads"])
    assert before != after                   # the screenshot changed where the hover highlights
