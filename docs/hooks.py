"""MkDocs hooks: the CLI and API reference pages, generated at every build.

The pages are made from the code itself, so they cannot drift from it:

* the CLI reference runs each console script of setup.py in a subprocess that
  imports its module, lets `bin/_common.run` register the flags `--help`
  shows, and reads each flag's name, default and help from absl (one
  subprocess per script: the binaries define flags of the same name);
* the API reference has one page per public module, found by walking the
  package's folders (so a module split off later gets its page), each page a
  mkdocstrings `:::` block that renders the module's docstrings;
* the repository's own Markdown files that the site shows whole (the benchmark
  investigations, the deployment notes) are read from where they live, at the
  same paths, so their links to each other work unchanged; a file they link to
  (a figure, a CSV) comes along.

A module is public unless its name, or a package above it, starts with "_";
`sac_distributed.bin` (the console scripts' mains) is left to the CLI page.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, NamedTuple, Sequence

from mkdocs.structure.files import File, Files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "sac_distributed"
SKIPPED_PACKAGES = (f"{PACKAGE}.bin",)
CLI_PAGE = "reference/cli.md"
API_DIR = "reference/api"
API_NAV_TITLE = "API"
MIRRORED_PAGES = (
    "benchmarks/README.md",
    "benchmarks/LEARNING.md",
    "launch/README.md",
    "launch/RAY.md",
)
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")

# Run in a subprocess per console script: imports the script's module with absl's
# app.run replaced, so that `run()` registers the --help flags and returns.
_FLAGS_PROBE = r"""
import importlib, json, sys
from absl import app, flags
script, target = sys.argv[1:3]
module_name, func = target.split(":")
sys.argv = [script, "--helpshort"]  # bin/__init__.py: no library imports for help
app.run = lambda *args, **kwargs: None
module = importlib.import_module(module_name)
getattr(module, func)()
rows = []
for flag in flags.FLAGS.get_key_flags_for_module(script):
    parser = flag.parser
    rows.append({
        "name": flag.name,
        "boolean": flag.boolean,
        "type": flag.flag_type(),
        "default": flag.default_as_str,
        "help": flag.help or "",
        "enum": list(getattr(parser, "enum_values", None) or []),
    })
print(json.dumps({"doc": module.__doc__ or "", "flags": rows}))
"""


class ConsoleScript(NamedTuple):
    name: str  # sac-launch
    target: str  # sac_distributed.bin.launch:run


def console_scripts(setup_py: str = os.path.join(REPO, "setup.py")) -> List[ConsoleScript]:
    """The console_scripts of setup.py, read from its source (not from an install)."""
    with open(setup_py, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "console_scripts":
                entries = [ast.literal_eval(e) for e in value.elts]
                return [
                    ConsoleScript(*(part.strip() for part in entry.split("=", 1)))
                    for entry in entries
                ]
    raise ValueError(f"{setup_py} lists no console_scripts")


def script_flags(script: ConsoleScript) -> Dict[str, object]:
    """The usage text and the --help flags of one console script, from absl."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run(
        [sys.executable, "-c", _FLAGS_PROBE, script.name, script.target],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reading the flags of {script.name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _source_digest() -> str:
    digest = hashlib.sha256()
    for folder, _, names in sorted(os.walk(os.path.join(REPO, PACKAGE))):
        for name in sorted(n for n in names if n.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as f:
                digest.update(name.encode() + f.read())
    with open(os.path.join(REPO, "setup.py"), "rb") as f:
        digest.update(f.read())
    digest.update(_FLAGS_PROBE.encode())
    return digest.hexdigest()[:20]


def all_script_flags(scripts: Sequence[ConsoleScript]) -> Dict[str, Dict[str, object]]:
    """Every script's flags, read in parallel; cached by the package's source so that
    `mkdocs serve` rebuilds a page edit without starting nine Python processes."""
    cache = os.path.join(tempfile.gettempdir(), f"sac_distributed_docs_cli_{_source_digest()}.json")
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            return json.load(f)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip((s.name for s in scripts), pool.map(script_flags, scripts)))
    with open(cache + ".tmp", "w", encoding="utf-8") as f:
        json.dump(found, f)
    os.replace(cache + ".tmp", cache)
    return found


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("<", "&lt;")


def cli_markdown(scripts: Sequence[ConsoleScript], found: Dict[str, Dict[str, object]]) -> str:
    lines = [
        "# Command-line reference",
        "",
        "Every flag of every console script, read from the binaries' absl flags when",
        "this site was built (`docs/hooks.py`). `--help` prints the same list;",
        "`--helpfull` adds absl's own flags. Hyperparameters whose default is `None`",
        "take the environment's preset (see [Presets and results](../results.md)).",
        "",
    ]
    lines += [f"- [`{s.name}`](#{s.name}): `{s.target}`" for s in scripts]
    for script in scripts:
        info = found[script.name]
        lines += ["", f"## {script.name}", "", f"`{script.target}`", ""]
        doc = str(info["doc"]).strip()
        if doc:
            lines += ["```text", doc, "```", ""]
        lines += ["| flag | default | help |", "|---|---|---|"]
        for flag in sorted(info["flags"], key=lambda f: f["name"]):
            name = f"--[no]{flag['name']}" if flag["boolean"] else f"--{flag['name']}"
            help_text = flag["help"]
            if flag["enum"]:
                help_text += f" One of: {', '.join(flag['enum'])}."
            default = flag["default"]
            if default is None:
                default = "None"
            else:  # absl quotes it: '1.0'
                if len(default) >= 2 and default[0] == default[-1] == "'":
                    default = default[1:-1]
                default = f"`{_cell(default)}`" if default else "`''`"
            lines.append(f"| `{name}` | {default} | {_cell(help_text)} |")
    return "\n".join(lines) + "\n"


def public_modules(root: str = REPO) -> List[str]:
    """Dotted names of the package's public modules, packages included, found on disk."""
    modules = []
    for folder, dirs, names in os.walk(os.path.join(root, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        if "__init__.py" not in names:
            dirs[:] = []
            continue
        package = os.path.relpath(folder, root).replace(os.sep, ".")
        if package.startswith(SKIPPED_PACKAGES):
            dirs[:] = []
            continue
        modules.append(package)
        modules += [
            f"{package}.{name[:-3]}"
            for name in sorted(names)
            if name.endswith(".py") and not name.startswith("_")
        ]
    return sorted(modules)


def is_package(module: str, root: str = REPO) -> bool:
    return os.path.isdir(os.path.join(root, *module.split(".")))


def api_page_path(module: str) -> str:
    return f"{API_DIR}/{module}.md"


def module_path(module: str, root: str = REPO) -> str:
    parts = module.split(".")
    if is_package(module, root):
        return os.path.join(root, *parts, "__init__.py")
    return os.path.join(root, *parts[:-1], parts[-1] + ".py")


def own_public_names(module: str) -> List[str]:
    """Names a module's own source defines at top level and makes public: not
    starting with "_", and listed in `__all__` where the module has one."""
    with open(module_path(module), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names: List[str] = []
    exported = None
    for node in tree.body:
        targets: List[ast.expr] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                if target.id == "__all__":
                    exported = set(ast.literal_eval(node.value))
                else:
                    names.append(target.id)
    return [
        n
        for n in dict.fromkeys(names)
        if not n.startswith("_") and (exported is None or n in exported)
    ]


def api_page_markdown(module: str) -> str:
    options = ["show_submodules: false"]
    if is_package(module):
        # A package's page shows what __init__.py itself defines; the names it
        # re-exports are documented on the pages of the modules that define them.
        own = own_public_names(module)
        options.append(f"members: {json.dumps(own)}" if own else "members: false")
    lines = [f"# `{module}`", "", f"::: {module}", "    options:"]
    lines += [f"      {option}" for option in options]
    return "\n".join(lines) + "\n"


def _first_line(module: str) -> str:
    with open(module_path(module), encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return _cell(doc.strip().split("\n\n")[0])


def api_index_markdown(modules: Sequence[str]) -> str:
    lines = [
        "# API reference",
        "",
        "One page per public module of `sac_distributed`, rendered from its docstrings",
        "when this site was built. The command-line programs (`sac_distributed.bin`)",
        "are in the [command-line reference](../cli.md).",
        "",
        "| module | what it is |",
        "|---|---|",
    ]
    lines += [f"| [`{m}`]({m}.md) | {_first_line(m)} |" for m in modules]
    return "\n".join(lines) + "\n"


def _api_nav(modules: Sequence[str]) -> List[object]:
    groups: Dict[str, List[object]] = {}
    for module in modules:
        parts = module.split(".")
        group = PACKAGE if len(parts) == 2 and not is_package(module) else ".".join(parts[:2])
        groups.setdefault(group, []).append({module: api_page_path(module)})
    return [f"{API_DIR}/index.md"] + [{group: pages} for group, pages in groups.items()]


def on_config(config, **kwargs):
    """Puts the generated API pages into the nav entry titled API."""
    modules = public_modules()
    for entry in _walk_nav(config["nav"] or []):
        if isinstance(entry, dict) and API_NAV_TITLE in entry:
            entry[API_NAV_TITLE] = _api_nav(modules)
    return config


def _walk_nav(items):
    for item in items:
        yield item
        if isinstance(item, dict):
            for value in item.values():
                if isinstance(value, list):
                    yield from _walk_nav(value)


def _linked_files(page: str) -> List[str]:
    """Repository files a mirrored page links to, other than the mirrored pages."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = f.read()
    found = []
    for target in _LINK.findall(text):
        if "://" in target or target.startswith("/"):
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(page), target))
        if path in MIRRORED_PAGES or path.startswith(".."):
            continue
        if os.path.isfile(os.path.join(REPO, path)):
            found.append(path)
    return found


def on_files(files: Files, config, **kwargs) -> Files:
    scripts = console_scripts()
    files.append(
        File.generated(config, CLI_PAGE, content=cli_markdown(scripts, all_script_flags(scripts)))
    )
    modules = public_modules()
    files.append(File.generated(config, f"{API_DIR}/index.md", content=api_index_markdown(modules)))
    for module in modules:
        files.append(
            File.generated(config, api_page_path(module), content=api_page_markdown(module))
        )
    linked = set()
    for page in MIRRORED_PAGES:
        files.append(File.generated(config, page, abs_src_path=os.path.join(REPO, page)))
        linked.update(_linked_files(page))
    for path in sorted(linked):
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, abs_src_path=os.path.join(REPO, path)))
    return files
