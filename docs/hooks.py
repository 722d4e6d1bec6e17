"""MkDocs hooks: the CLI and API reference pages, generated at every build.

The pages are made from the code itself, so they cannot drift from it:

* the CLI reference runs each console script of setup.py in a subprocess that
  imports its module, lets `bin/_common.run` register the flags `--help`
  shows, and reads each flag's name, default and help from absl (one
  subprocess per script: the binaries define flags of the same name);
* the API reference has one page per public module, found by walking the
  package's folders (so a module split off later gets its page), each page a
  mkdocstrings `:::` block that renders the module's docstrings;
* the presets table on the results page (`<!-- presets-table -->`) is read
  from `sac_distributed.config.PRESETS`;
* the list of error messages on the troubleshooting page
  (`<!-- error-messages -->`) is read from every `raise` of an error class of
  `sac_distributed/errors.py` in the package's source;
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
from typing import Dict, List, NamedTuple, Optional, Sequence

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
    "benchmarks/device/README.md",
    "launch/README.md",
    "launch/RAY.md",
)
# Repository files that pages under docs/ show (figures), copied to the same paths.
EXTRA_FILES = ("benchmarks/results/curves.png",)
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


def _flag_name(flag: Dict[str, object]) -> str:
    return f"--[no]{flag['name']}" if flag["boolean"] else f"--{flag['name']}"


def _flag_row(flag: Dict[str, object]) -> str:
    help_text = str(flag["help"])
    if flag["enum"] and not help_text.startswith("<"):  # absl writes <a|b>: for enums
        help_text += f" One of: {', '.join(flag['enum'])}."
    default = flag["default"]
    if default is None:
        default = "None"
    else:  # absl quotes it: '1.0'
        if len(default) >= 2 and default[0] == default[-1] == "'":
            default = default[1:-1]
        default = f"`{_cell(default)}`" if default else "`''`"
    return f'| <code class="nowrap">{_flag_name(flag)}</code> | {default} | {_cell(help_text)} |'


def _shared_flags(found: Dict[str, Dict[str, object]]) -> Dict[str, Dict[str, object]]:
    """Flags that several scripts have with the same default and help."""
    seen: Dict[str, List[str]] = {}
    rows: Dict[str, Dict[str, object]] = {}
    for info in found.values():
        for flag in info["flags"]:
            seen.setdefault(_flag_row(flag), []).append(flag["name"])
            rows[_flag_row(flag)] = flag
    return {rows[row]["name"]: rows[row] for row, names in seen.items() if len(names) > 1}


def cli_markdown(scripts: Sequence[ConsoleScript], found: Dict[str, Dict[str, object]]) -> str:
    shared = _shared_flags(found)
    lines = [
        "# Command-line reference",
        "",
        "Every flag of every console script, read from the binaries' absl flags when",
        "this site was built (`docs/hooks.py`). `--help` prints a script's list;",
        "`--helpfull` adds absl's own flags. Hyperparameters whose default is `None`",
        "take the environment's preset ([Presets and results](../results.md#presets)).",
        "",
    ]
    lines += [f"- [`{s.name}`](#{s.name}): `{s.target}`" for s in scripts]
    lines += ["- [Flags several scripts share](#shared-flags)"]
    for script in scripts:
        info = found[script.name]
        lines += ["", f"## {script.name}", "", f"`{script.target}`", ""]
        doc = str(info["doc"]).strip()
        if doc:
            lines += ["```text", doc, "```", ""]
        flags = sorted(info["flags"], key=lambda f: f["name"])
        own = [f for f in flags if shared.get(f["name"]) != f]
        if own:
            lines += ["| flag | default | help |", "|---|---|---|"]
            lines += [_flag_row(f) for f in own]
            lines.append("")
        common = [f"[`{_flag_name(f)}`](#{f['name']})" for f in flags if f not in own]
        if common:
            lines.append(f"Shared flags ([below](#shared-flags)): {', '.join(common)}.")
    lines += [
        "",
        "## Shared flags",
        "",
        "The same default and help in every script that has them.",
        "",
    ]
    lines += ["| flag | default | help |", "|---|---|---|"]
    for name in sorted(shared):
        row = _flag_row(shared[name])
        lines.append(row.replace("| <code", f'| <span id="{name}"></span><code', 1))
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
        title = "overview" if module == group else module[len(group) + 1 :]
        groups.setdefault(group, []).append({title: api_page_path(module)})
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


PRESETS_MARKER = "<!-- presets-table -->"


def _value(value: object) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def presets_markdown() -> str:
    """Each preset's values that differ from the defaults, and the defaults."""
    import dataclasses

    sys.path.insert(0, REPO)
    try:
        from sac_distributed import config as config_lib
    finally:
        sys.path.remove(REPO)
    base = config_lib.Hyperparams()
    fields = [f.name for f in dataclasses.fields(base)]
    lines = ["| `--env_name` | its values (every other hyperparameter: the default below) |"]
    lines.append("|---|---|")
    for env_name, preset in config_lib.PRESETS.items():
        changed = [
            f"`{name}={_value(getattr(preset, name))}`"
            for name in fields
            if getattr(preset, name) != getattr(base, name)
        ]
        lines.append(f'| <code class="nowrap">{env_name}</code> | {", ".join(changed)} |')
    lines += ["", "| hyperparameter | default |", "|---|---|"]
    lines += [f"| `--{name}` | `{_value(getattr(base, name))}` |" for name in fields]
    return "\n".join(lines) + "\n"


ERRORS_MARKER = "<!-- error-messages -->"


class RaisedError(NamedTuple):
    error: str  # the class raised
    message: str  # its message, with {expression} for what is filled in at run time
    where: str  # sac_distributed/jobs/server.py: start_server


def error_classes() -> Dict[str, str]:
    """The classes of sac_distributed/errors.py and their docstrings."""
    with open(os.path.join(REPO, PACKAGE, "errors.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {n.name: ast.get_docstring(n) or "" for n in tree.body if isinstance(n, ast.ClassDef)}


def _message(node: ast.AST, helpers: Dict[str, ast.FunctionDef]) -> str:
    """A message expression as text: literal parts as they are, the rest as {code}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_message(v, helpers) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return "{" + ast.unparse(node.value) + "}"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message(node.left, helpers) + _message(node.right, helpers)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
        returns = [
            r.value
            for r in ast.walk(helpers[node.func.id])
            if isinstance(r, ast.Return) and r.value
        ]
        if returns:  # a helper that builds the message: its (last) returned text
            return _message(returns[-1], helpers)
    return "{" + ast.unparse(node) + "}"


def _parse_package(root: str) -> List[tuple]:
    parsed = []
    for folder, dirs, names in sorted(os.walk(os.path.join(root, PACKAGE))):
        dirs.sort()
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                parsed.append((os.path.relpath(path, root), ast.parse(f.read())))
    return parsed


def _error_call(node: ast.AST, classes: Dict[str, str]) -> Optional[ast.Call]:
    """The `SomeError(message)` of `raise SomeError(message)`, or of a `return` of one
    (a function that builds the error for its caller to raise)."""
    call = node.exc if isinstance(node, ast.Raise) else None
    if isinstance(node, ast.Return):
        call = node.value
    if isinstance(call, ast.Call) and call.args:
        func = call.func
        error = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if error in classes:
            return call
    return None


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _raising_helpers(parsed, classes) -> Dict[str, tuple]:
    """Functions such as `_require(condition, message)` that raise an error class with
    one of their parameters as the message: name -> (class, that parameter's index)."""
    helpers = {}
    for _, tree in parsed:
        for func in tree.body:
            if not isinstance(func, ast.FunctionDef):
                continue
            params = [a.arg for a in func.args.args]
            for node in _own_nodes(func):
                call = _error_call(node, classes)
                message = call.args[0] if call else None
                if isinstance(message, ast.Name) and message.id in params:
                    helpers[func.name] = (_called_name(call), params.index(message.id))
    return helpers


def raised_errors(root: str = REPO) -> List[RaisedError]:
    """Every `raise SomeError(message)` in the package whose class errors.py defines,
    and every call of a helper that raises one with a message it is given."""
    classes = error_classes()
    parsed = _parse_package(root)
    helpers = _raising_helpers(parsed, classes)
    found = []
    for path, tree in parsed:
        builders = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        for scope in ast.walk(tree):
            if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
                continue
            where = path if isinstance(scope, ast.Module) else f"{path}: {scope.name}"
            for node in _own_nodes(scope):
                call = _error_call(node, classes)
                if call and getattr(scope, "name", "") not in helpers:
                    message = _message(call.args[0], builders)
                    found.append(RaisedError(_called_name(call), message, where))
                if isinstance(node, ast.Call) and _called_name(node) in helpers:
                    error, index = helpers[_called_name(node)]
                    if len(node.args) > index:
                        message = _message(node.args[index], builders)
                        found.append(RaisedError(error, message, where))
    return found


def _own_nodes(scope: ast.AST):
    """The nodes of a function (or module) body, not those of functions nested in it."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def errors_markdown() -> str:
    classes = error_classes()
    raised = raised_errors()
    lines = []
    for error, doc in classes.items():
        rows = sorted({(r.message, r.where) for r in raised if r.error == error})
        if not rows:
            continue
        lines += [f"### {error}", "", doc.split("\n\n")[0], "", "| message | raised in |"]
        lines.append("|---|---|")
        lines += [f"| {_cell(message)} | `{where}` |" for message, where in rows]
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    if PRESETS_MARKER in markdown:
        markdown = markdown.replace(PRESETS_MARKER, presets_markdown())
    if ERRORS_MARKER in markdown:
        markdown = markdown.replace(ERRORS_MARKER, errors_markdown())
    return markdown


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
    linked = set(EXTRA_FILES)
    for page in MIRRORED_PAGES:
        files.append(File.generated(config, page, abs_src_path=os.path.join(REPO, page)))
        linked.update(_linked_files(page))
    for path in sorted(linked):
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, abs_src_path=os.path.join(REPO, path)))
    return files
