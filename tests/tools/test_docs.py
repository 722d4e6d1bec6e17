"""The docs site (mkdocs.yml, docs/): it builds offline with warnings as errors, and
its generated references hold every flag and every public name.

The checks here do not reuse the generator in docs/hooks.py: a console script's
flags come from its own `--helpshort` output, the console scripts from setup.py's
text, and the public names from each module's source, so a generator that skips
something fails them.
"""

import ast
import html
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.processes import DEADLINE_S, setup_py_console_scripts
from support.repo import PACKAGE_DIR, REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """`mkdocs build --strict` into a temporary folder, as `make docs-build` does."""
    site_dir = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    out = built.stdout + built.stderr
    assert built.returncode == 0, out[-5000:]
    assert "WARNING" not in out, out[-5000:]
    return site_dir


def _text(path) -> str:
    """A built page's text: tags dropped, entities decoded."""
    with open(path, encoding="utf-8") as f:
        return html.unescape(re.sub(r"<[^>]+>", " ", f.read()))


def test_the_site_has_every_page_of_the_nav(site):
    for page in (
        "getting-started",
        "concepts",
        "own-env",
        "results",
        "tuning",
        "cluster",
        "operations",
        "performance",
        "troubleshooting",
        "reference/cli",
        "reference/api",
        "benchmarks/LEARNING",
    ):
        assert (site / page / "index.html").is_file(), page


def _console_scripts():
    """(script, its module's full name) for each console script of setup.py."""
    found = [
        (script, f"sac_distributed.bin.{module}") for script, module in setup_py_console_scripts()
    ]
    assert len(found) >= 9, found
    return found


def _flags_in_help(module: str):
    done = subprocess.run(
        [sys.executable, "-m", module, "--helpshort"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return re.findall(r"^\s+--(?:\[no\])?([\w.-]+):", done.stdout, re.MULTILINE)


def test_every_flag_of_every_console_script_is_in_the_cli_reference(site):
    with open(site / "reference" / "cli" / "index.html", encoding="utf-8") as f:
        page = f.read()
    scripts = _console_scripts()
    with ThreadPoolExecutor(max_workers=3) as pool:
        flags_of = dict(zip(scripts, pool.map(lambda s: _flags_in_help(s[1]), scripts)))
    for (script, module), flags in flags_of.items():
        assert len(flags) >= 3, (script, flags)
        start = page.find(f'<h2 id="{script}"')
        assert start >= 0, f"no section for {script}"
        end = page.find("<h2 ", start + 1)
        section = html.unescape(re.sub(r"<[^>]+>", " ", page[start : end if end > 0 else None]))
        assert module in section
        missing = [f for f in flags if not re.search(rf"--(\[no\])?{re.escape(f)}\b", section)]
        assert not missing, f"{script}: flags missing from the CLI reference: {missing}"


def _public_modules():
    """Every module of the package but sac_distributed.bin (the CLI page's) and those
    under a name starting with "_", read from the folders."""
    modules = {}
    for folder, dirs, names in os.walk(PACKAGE_DIR):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        package = os.path.relpath(folder, REPO).replace(os.sep, ".")
        if package == "sac_distributed.bin" or "__init__.py" not in names:
            dirs[:] = []
            continue
        for name in names:
            if name == "__init__.py":
                modules[package] = os.path.join(folder, name)
            elif name.endswith(".py") and not name.startswith("_"):
                modules[f"{package}.{name[:-3]}"] = os.path.join(folder, name)
    return modules


def _public_classes_and_functions(path):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    exported = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            exported = set(ast.literal_eval(node.value))
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not node.name.startswith("_")
        and (exported is None or node.name in exported)
    ]


def test_every_public_class_and_function_is_in_the_api_reference(site):
    modules = _public_modules()
    assert {"sac_distributed.replay.tables", "sac_distributed.envs.sources"} <= set(modules)
    api = site / "reference" / "api"
    index = _text(api / "index.html")
    missing = []
    for module, path in sorted(modules.items()):
        assert module in index, f"{module} is not listed on the API index"
        page = api / module / "index.html"
        assert page.is_file(), f"no API page for {module}"
        with open(page, encoding="utf-8") as f:
            built = f.read()
        missing += [
            f"{module}.{name}"
            for name in _public_classes_and_functions(path)
            if f'id="{module}.{name}"' not in built
        ]
    assert not missing, f"public names missing from the API reference: {missing}"


def test_a_documented_function_shows_its_docstring(site):
    """Not only a heading: the docstring's text is on the page."""
    text = _text(site / "reference" / "api" / "sac_distributed.errors" / "index.html")
    assert "Another job holds what this one needs" in text


_RAISE = re.compile(r"raise (?:errors\.|config_lib\.)?(\w+Error)\(\s*f?\"([^\"{\\]{15,})")


def test_every_error_message_is_on_the_troubleshooting_page(site):
    """Each literal start of a message raised with an error class of errors.py (read
    here with a regular expression, not the generator's parser) is on the page."""
    with open(os.path.join(PACKAGE_DIR, "errors.py"), encoding="utf-8") as f:
        classes = set(re.findall(r"^class (\w+)\(", f.read(), re.MULTILINE))
    text = " ".join(_text(site / "troubleshooting" / "index.html").split())
    missing, seen = [], 0
    for path in set(_public_modules().values()) | {
        os.path.join(folder, name)
        for folder, _, names in os.walk(os.path.join(PACKAGE_DIR, "bin"))
        for name in names
        if name.endswith(".py")
    }:
        with open(path, encoding="utf-8") as f:
            for error, start in _RAISE.findall(f.read()):
                if error in classes:
                    seen += 1
                    if " ".join(start.split()) not in text:
                        missing.append((os.path.relpath(path, REPO), start))
    assert seen >= 30, seen
    assert not missing, f"messages missing from the troubleshooting page: {missing}"
    for error in classes:
        assert error in text, error


def test_the_presets_table_lists_every_preset(site):
    text = _text(site / "results" / "index.html")
    with open(os.path.join(PACKAGE_DIR, "config", "presets.py"), encoding="utf-8") as f:
        source = f.read()
    envs = re.findall(r'^\s+"([\w-]+-v\d+)": ', source, re.MULTILINE)
    envs += re.findall(r'^\s+\("([\w-]+-v\d+)", \d+[,)]', source, re.MULTILINE)
    assert len(envs) >= 10, envs
    for env in envs:
        assert f"{env} " in text or f"{env}\n" in text, env
    assert "--critic_learning_rate" in text and "0.0003" in text


README_MAX_LINES = 260  # issue 47: a README of at most ~250 lines; the rest is the site


def test_the_readme_is_short_and_its_links_reach_the_docs(site):
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert len(readme.splitlines()) <= README_MAX_LINES, len(readme.splitlines())
    assert re.search(r"^make run +# ", readme, re.MULTILINE)
    assert re.search(r"^make test +# ", readme, re.MULTILINE)
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if "://" not in link and not link.startswith("#")]
    assert sum(link.startswith("docs/") for link in local) >= 8, local
    for link in local:
        path, _, anchor = link.partition("#")
        assert os.path.exists(os.path.join(REPO, path)), f"README links to a missing {path}"
        if path.startswith("docs/") and path.endswith(".md") and anchor:
            page = path[len("docs/") : -len(".md")]
            page = "" if page == "index" else page
            with open(site / page / "index.html", encoding="utf-8") as f:
                assert f'id="{anchor}"' in f.read(), f"README links to a missing {link}"
