"""Finding: a failing case, its verdict, the environment, and how it was confirmed.

Reading one never executes anything: a finding file is JSON, read with a size
limit, decoded as UTF-8 and checked field by field (``Finding.from_json``,
``read_finding``). A file that is not a finding raises ``FindingFormatError``
(a ValueError) with one line naming the file and the field. The signature names
the finding's folder in a store, so it must match ``SIGNATURE``: a finding
cannot make a store write outside itself.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.util
import json
import keyword
import os
import platform
import re
import stat
import sys
import typing
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Optional

from symfuzz.fuzz.case import Case
from symfuzz.fuzz.model_case import check_model_case, is_model_case
from symfuzz.oracles.verdict import Verdict

# The format of finding.json. The verdict's evidence became typed records without
# changing it: findings of every version-1 symfuzz load.
FINDING_VERSION = 1

# A finding.json is a few kilobytes (a campaign's largest are well under 1 MB); a bigger
# file is not one, and is refused before it is read.
MAX_FINDING_BYTES = 50 * 1024 * 1024
# Signatures are "<symptom>-<10 hex digits>"; any name a folder can safely take is
# accepted (a letter or digit, then letters, digits, ".", "_", "-"), never ".." nor a separator.
SIGNATURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
NOT_OURS = "this is not a finding symfuzz wrote (or it was edited); regenerate it or remove the folder"
# What a lane's config and env may hold (``_check_lane``).
LANE_FLAG = re.compile(r"[a-z][a-z0-9_]*")
LANE_ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_", "PYTORCH_", "TRITON_")
LANE_ENV = re.compile(rf"(?:{'|'.join(LANE_ENV_PREFIXES)})[A-Z0-9_]+")


class FindingFormatError(ValueError):
    """A finding (a finding.json, a baseline entry's repro) this symfuzz cannot read:
    the message is one line that names the field, and the file when there is one."""


def signature_problem(value) -> Optional[str]:
    """Why ``value`` cannot be a signature (None: it can)."""
    if not isinstance(value, str):
        return f"must be a string, got {kind_of(value)}"
    if not SIGNATURE.fullmatch(value) or ".." in value:
        return (f"{value[:80]!r} is not a signature (letters, digits, '.', '_' and '-' only, "
                "no '..', at most 200 characters)")
    return None


def kind_of(value) -> str:
    """A JSON value's type in words, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {int: "a number", float: "a number", str: "a string", list: "an array", dict: "an object"}.get(
        type(value), type(value).__name__)


def _problem(message: str, what: str = "finding") -> FindingFormatError:
    return FindingFormatError(f"{message}; {_not_ours(what)}")


def _field(data: dict, name: str, types: tuple, what: str, prefix: str = "", required: bool = True):
    if name not in data:
        if required:
            raise _problem(f"field '{prefix}{name}' is missing")
        return None
    value = data[name]
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        raise _problem(f"field '{prefix}{name}' must be {what}, got {kind_of(value)}")
    return value


def _check_verdict(data: dict) -> None:
    _field(data, "ok", (bool,), "true or false", "verdict.")
    if data["ok"]:
        raise _problem("field 'verdict.ok' is true, but a finding records a failure")
    _field(data, "oracle", (str,), "a string", "verdict.")
    _field(data, "symptom", (str,), "a string", "verdict.")
    _field(data, "stage", (str, type(None)), "a string or null", "verdict.", required=False)
    _field(data, "call_index", (int, type(None)), "a whole number or null", "verdict.", required=False)
    _field(data, "evidence", (dict,), "an object", "verdict.", required=False)
    if "signature" not in data:
        raise _problem("field 'verdict.signature' is missing")
    problem = signature_problem(data["signature"])
    if problem:
        raise _problem(f"field 'verdict.signature' {problem}")


def _check_lane(data: dict) -> None:
    _field(data, "name", (str,), "a string", "lane.")
    for name in ("backend", "device"):
        _field(data, name, (str,), "a string", "lane.", required=False)
    for name in ("mode", "codegen", "setup", "runner"):
        _field(data, name, (str, type(None)), "a string or null", "lane.", required=False)
    for name in ("config", "env"):
        _field(data, name, (dict, type(None)), "an object", "lane.", required=False)
    # The repro script writes ``inductor_config.<key> = <value>`` and sets the env before torch
    # is imported: keys are flag names, values JSON scalars, and the env only torch's own.
    for key, value in (data.get("config") or {}).items():
        if not LANE_FLAG.fullmatch(key) or keyword.iskeyword(key):
            raise _problem(f"field 'lane.config' has the key {key!r:.60}, which is not a flag name (a lowercase identifier)")
        if not (value is None or isinstance(value, (bool, int, float, str))):
            raise _problem(f"field 'lane.config.{key}' must be a number, a string, true/false or null, got {kind_of(value)}")
    for key, value in (data.get("env") or {}).items():
        if not LANE_ENV.fullmatch(key):
            raise _problem(f"field 'lane.env' has the variable {key!r:.60}; a lane sets only torch's and triton's "
                           f"({', '.join(p + '*' for p in LANE_ENV_PREFIXES)})")
        if not isinstance(value, str) or "\x00" in value:
            raise _problem(f"field 'lane.env.{key}' must be a string, got {kind_of(value)}")


def _check_evidence(evidence) -> None:
    """Each typed evidence field holds what its annotation says (the reports and the
    minifier format them: a timeout that is a string would fail there, not here)."""
    if evidence is None:
        return
    hints = typing.get_type_hints(type(evidence))
    for f in dataclasses.fields(evidence):
        value, hint = getattr(evidence, f.name), hints.get(f.name)
        if f.name != "extra" and hint is not None and not _fits(value, hint):
            raise _problem(f"field 'verdict.evidence.{f.name}' must be {_hint_words(hint)}, got {kind_of(value)}")


def _fits(value, hint) -> bool:
    if typing.get_origin(hint) is typing.Union:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (str, bool, dict, list):
        return isinstance(value, hint)
    return True  # a hint this check does not know: not checked


def _hint_words(hint) -> str:
    if typing.get_origin(hint) is typing.Union:
        return " or ".join(_hint_words(arg) for arg in typing.get_args(hint))
    hint = typing.get_origin(hint) or hint
    return {type(None): "null", float: "a number", int: "a whole number", str: "a string", bool: "true/false",
            dict: "an object", list: "an array"}.get(hint, getattr(hint, "__name__", str(hint)))


def check_case(data, what: str = "finding") -> None:
    """FindingFormatError unless ``data`` is a case this symfuzz can parse (``Case.from_json``);
    ``what`` holds it (the message says it is not a ``what`` symfuzz wrote)."""
    try:
        if is_model_case(data):
            check_model_case(data)
        else:
            Case.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # untrusted JSON: whatever shape error the case's own parser meets is this one line
        detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise _problem(f"field 'case' is not a case this symfuzz can read ({type(exc).__name__}: {detail})",
                       what) from None


def environment() -> dict:
    """Versions that, with the seed, reproduce a campaign (a fresh copy each call)."""
    return dict(_environment())


@functools.lru_cache(maxsize=None)
def _environment() -> dict:
    # Computed once per process: the campaign loop asks for it every few seconds.
    env = {"python": sys.version.split()[0], "platform": platform.platform()}
    env["torch"], env["torch_git"] = _torch_versions()
    try:
        # optional: triton is only needed by some lanes
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    try:
        env["symfuzz"] = version("symfuzz")
    except Exception:  # noqa: BLE001 - running from a checkout
        env["symfuzz"] = None
    try:
        # optional: the model source's library, read from its metadata (importing it takes seconds)
        env["transformers"] = version("transformers")
    except Exception:  # noqa: BLE001 - not installed
        env["transformers"] = None
    return env


def _torch_versions() -> tuple:
    """(torch.__version__, torch.version.git_version) of the torch this process imports, or
    (None, None) where there is none. Read from torch/version.py without importing torch where
    it is not imported yet: a campaign's coordinator asks at its start, and importing torch
    there costs seconds that nothing else in it may need."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            spec = importlib.util.find_spec("torch")
            text = Path(spec.origin).with_name("version.py").read_text()
            found = {t.id: node.value.value for node in ast.parse(text).body
                     if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant)
                     for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                     if isinstance(t, ast.Name)}
            if isinstance(found.get("__version__"), str):
                return found["__version__"], found.get("git_version")
        except (ImportError, AttributeError, TypeError, ValueError, OSError, SyntaxError):
            pass
        try:
            # deferred and optional: a torch laid out otherwise is imported after all, if installed
            import torch
        except ImportError:
            return None, None
    return torch.__version__, getattr(torch.version, "git_version", None)


@dataclass
class Finding:
    case: dict  # Case.to_json()
    verdict: Verdict
    lane: dict  # Lane.to_json(): the lane is embedded so the finding replays alone
    environment: dict = field(default_factory=environment)
    triage: dict = field(default_factory=dict)
    confirmation: Optional[dict] = None
    # What the compiler did with the case (family -> name-free features; symfuzz.coverage)
    features: dict = field(default_factory=dict)

    @property
    def signature(self) -> str:
        return self.verdict.signature

    def to_json(self) -> dict:
        data = {
            "finding_version": FINDING_VERSION,
            "signature": self.signature,
            "case": self.case,
            "verdict": self.verdict.to_json(),
            "lane": self.lane,
            "environment": self.environment,
            "triage": self.triage,
            "confirmation": self.confirmation,
        }
        if self.features:  # (a finding from before features were recorded reads back as it was)
            data["features"] = self.features
        return data

    @staticmethod
    def from_json(data: dict, parse_case: bool = True) -> "Finding":
        """The finding ``to_json`` wrote; FindingFormatError (naming the field) for anything else.
        ``parse_case``: also parse the case (False: only check that it is an object)."""
        if not isinstance(data, dict):
            raise _problem(f"it holds {kind_of(data)}, not a finding object")
        found = data.get("finding_version", 1)
        if not isinstance(found, int) or isinstance(found, bool) or found < 1:
            raise _problem(f"field 'finding_version' must be a whole number from 1, got {kind_of(found)} {found!r:.40}")
        if found > FINDING_VERSION:
            raise FindingFormatError(f"written by a newer symfuzz (finding_version {found}; this one reads "
                                     f"{FINDING_VERSION}); upgrade symfuzz to replay it")
        for name in ("verdict", "case", "lane"):
            _field(data, name, (dict,), "an object")
        for name in ("environment", "triage", "features"):
            _field(data, name, (dict,), "an object", required=False)
        _field(data, "confirmation", (dict, type(None)), "an object or null", required=False)
        _check_verdict(data["verdict"])
        if "signature" in data and data["signature"] != data["verdict"]["signature"]:
            problem = signature_problem(data["signature"]) or (
                f"{data['signature']!r:.80} differs from the verdict's {data['verdict']['signature']!r}")
            raise _problem(f"field 'signature' {problem}")
        _check_lane(data["lane"])
        if parse_case:
            check_case(data["case"])
        try:
            verdict = Verdict.from_json(data["verdict"])
        except (TypeError, ValueError) as exc:  # a symptom, stage or field this version does not know
            raise FindingFormatError(f"its verdict is not one this symfuzz knows ({exc}); it may have been "
                                     "written by a newer symfuzz: upgrade symfuzz to replay it") from None
        _check_evidence(verdict.evidence)
        return Finding(
            case=data["case"],
            verdict=verdict,
            lane=data["lane"],
            environment=data.get("environment", {}),
            triage=data.get("triage", {}),
            confirmation=data.get("confirmation"),
            features=data.get("features", {}),
        )


def read_finding(path) -> Finding:
    """The finding in the file ``path``; FindingFormatError, naming the file, for anything
    that is not one. Nothing in the file is executed, and a file over MAX_FINDING_BYTES
    (or one that is not a regular file: a folder, a device, a pipe) is not read at all."""
    path = Path(path)
    try:
        return Finding.from_json(read_json_file(path, MAX_FINDING_BYTES))
    except FindingFormatError as exc:
        raise FindingFormatError(f"{path}: {exc}") from None


def read_json_file(path: Path, limit: int, what: str = "finding"):
    """The JSON value in the file ``path``, read strictly: UTF-8, at most ``limit`` bytes,
    no duplicate keys. FindingFormatError (without the path: the caller adds it) if not."""
    try:
        info = os.stat(path)  # follows a symlink: reading what it points to is fine, if it is a file
    except FileNotFoundError:
        raise FindingFormatError("does not exist (or is a broken symlink)") from None
    except OSError as exc:
        raise FindingFormatError(f"cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise FindingFormatError(f"is a folder, not a {what} file")
    if not stat.S_ISREG(info.st_mode):
        raise FindingFormatError(f"is not a regular file (a device, a pipe or a socket), not a {what} file")
    if info.st_size > limit:
        raise FindingFormatError(f"is {info.st_size / 2**20:.0f} MB: too big for a {what} file "
                                 f"(at most {limit // 2**20} MB), so it was not read")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise FindingFormatError(f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > limit:
        raise FindingFormatError(f"grew past {limit // 2**20} MB while being read: too big for a {what} file")
    if not raw.strip():
        raise FindingFormatError(f"is empty; {_not_ours(what)}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FindingFormatError(f"is not UTF-8 text (byte {exc.start}); {_not_ours(what)}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        cut = " (cut short: truncated?)" if exc.pos >= len(text.rstrip()) else ""
        raise FindingFormatError(f"is not readable JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{cut}; "
                                 f"{_not_ours(what)}") from None
    except _DuplicateKey as exc:
        raise FindingFormatError(f"has the key {exc.args[0]!r:.80} twice in one object; {_not_ours(what)}") from None
    except RecursionError:
        raise FindingFormatError(f"is JSON nested too deeply to read; {_not_ours(what)}") from None


def _not_ours(what: str) -> str:
    return NOT_OURS if what == "finding" else f"this is not a {what} symfuzz wrote (or it was edited)"


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out
