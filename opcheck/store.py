"""The xfail store of symfuzz opcheck: which checks are expected to fail on which custom op.

The file format is PyTorch's ``failures_dict.json`` (torch/testing/_internal/optests/
generate_tests.py), serialized byte for byte the way PyTorch writes it: PyTorch's ``FailuresDict``
loads our files and we load theirs::

    {"_description": "...", "_version": 1,
     "data": {"mylib::op": {"test_faketensor": {"comment": "...", "status": "xfail"}}}}

Our own entries use the bare key ``test_<check>``. PyTorch's entries look like
``TestMyOps.test_faketensor__test_foo`` (one per generated test); they apply to the
check named after ``test_`` so an existing PyTorch file migrates without edits.
(PyTorch's ``generate_opcheck_tests`` validator wants ``Class.test`` names, so it
would refuse our bare keys: a store is shared for reading, not for that generator.)

One more key under an op is a setting, not a check: ``"require_autograd"`` makes a
missing gradient formula on that op a failure (by default an op without one is
reported as not differentiable, an info line, and the gradient checks skip)::

    "mylib::op": {"require_autograd": {"comment": "trained through: needs a backward",
                                       "status": "required"}}

Its status must be ``"required"``; a human writes it, with the reason in the
comment. Accept mode never adds, removes or changes it, and it is no check's
expected result. PyTorch's ``FailuresDict`` still loads such a file (it is the same
JSON shape).

The checks it knows are opcheck.checklist's. No torch here (the standard library,
corpus.atomic and opcheck.checklist only): the pytest plugin imports this module and must
not import torch.
"""

import json
import os
import re

from symfuzz.corpus.atomic import write_text
from symfuzz.opcheck.checklist import CHECKS

VERSION = 1  # PyTorch's failures_dict version; a different one is not a format we know
DESCRIPTION = (
    "symfuzz opcheck xfail store, in PyTorch's failures_dict.json format: "
    "expected failures of custom-op checks, per operator."
)
# "success" is accepted when reading (a natural thing to type) but written as PyTorch's "xsuccess".
_READ_STATUSES = {"xfail": "xfail", "skip": "skip", "xsuccess": "xsuccess", "success": "xsuccess"}
# The per-op setting beside the checks' entries (see the module docstring): not a check.
REQUIRE_AUTOGRAD = "require_autograd"
_REQUIRED = "required"  # its only status
# A comment holds the failure's headline and the details a headline introduces ("...: details"),
# up to this many characters: enough for a Jacobian mismatch or a torch error with its op name.
_COMMENT_CHARS = 400


class StoreError(Exception):
    """A store file that cannot be read; the message is one line naming the file."""


def normalize_op(op):
    """``mylib::op.default`` -> ``mylib::op``: the default overload is stored under the bare qualname."""
    return op.removesuffix(".default")


def _key(check):
    if check not in CHECKS:
        raise ValueError(f"unknown opcheck check {check!r}; expected one of {', '.join(CHECKS)}")
    return "test_" + check


def _migrated(check):
    """Matches PyTorch's per-test keys for a check: [Class.]test_<check>__<test>[params]."""
    # The double underscore keeps test_aot_dispatch_dynamic__x from matching another check's prefix.
    return re.compile(r"(?:[A-Za-z_]\w*\.)?" + re.escape(_key(check)) + "__")


def _comment(message):
    """The comment accept() writes for a failure: its first non-blank line (PyTorch's errors
    often start with a newline); a first line ending in ":" introduces its details (gradcheck's
    "disagrees with numerical gradients:" then the Jacobian mismatch), so the lines after it
    follow, up to a traceback. Longer than _COMMENT_CHARS: cut at a word, with "..."."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[0] if lines else "failed"
    if text.endswith(":"):
        for line in lines[1:]:
            if line.startswith("Traceback") or len(text) >= _COMMENT_CHARS:
                break
            text += " " + line
    if len(text) > _COMMENT_CHARS:
        cut = text[: _COMMENT_CHARS - 3]
        cut = cut.rsplit(" ", 1)[0] if " " in cut[_COMMENT_CHARS // 2:] else cut
        text = cut.rstrip() + "..."
    return _AUTO + text


_AUTO = "symfuzz: "  # the prefix of comments accept() writes itself


class XfailStore:
    def __init__(self, path, data=None, description=DESCRIPTION):
        self.path = str(path)
        self.data = {} if data is None else data  # {op: {test_name: {"comment": str, "status": str}}}
        self.description = description

    @classmethod
    def load(cls, path):
        """Read a store; a missing or empty file is an empty store (written on save)."""
        path = str(path)
        try:
            with open(path, encoding="utf-8") as fp:
                text = fp.read()
        except FileNotFoundError:
            return cls(path)
        except IsADirectoryError:
            raise StoreError(f"{path}: is a folder, not a store file (name a .json file in it)") from None
        except UnicodeDecodeError as e:
            raise StoreError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); "
                             "a store is JSON in UTF-8") from None
        except OSError as e:
            raise StoreError(f"{path}: cannot read it ({e.strerror or e})") from None
        if not text.strip():
            return cls(path)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise StoreError(f"{path}: not valid JSON ({e})") from None
        return cls(path, *_parse(path, obj))

    @staticmethod
    def check_writable(path):
        """Raise StoreError unless accept mode can write the store at path: an existing
        file must have write permission (its mode bits, which hold for root too: a store
        made read-only on purpose is not replaced), a new one needs a folder it can go in."""
        path = os.path.abspath(str(path))
        if os.path.isdir(path):
            raise StoreError(f"{path}: is a folder, not a store file (name a .json file in it)")
        if os.path.exists(path):
            if not os.stat(path).st_mode & 0o222 or not os.access(path, os.W_OK):
                raise StoreError(f"{path}: is read-only; accept mode rewrites it (make it writable, "
                                 "or run without accept)")
        parent = os.path.dirname(path)
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)  # save() creates the missing folders below it
        if not os.path.isdir(parent):
            raise StoreError(f"{path}: {parent} is a file, not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise StoreError(f"{path}: the folder {parent} is not writable; accept mode writes the store there")

    def _matching(self, op, check):
        """(exact entry or None, [(name, entry)] of migrated PyTorch-style entries) for one check."""
        tests = self.data.get(normalize_op(op), {})
        pattern = _migrated(check)
        migrated = [(name, tests[name]) for name in sorted(tests) if pattern.match(name)]
        return tests.get(_key(check)), migrated

    def expected(self, op, check):
        """(status, comment): status is "xfail", "skip" or "success"."""
        exact, migrated = self._matching(op, check)
        if exact is not None:
            return _public(exact["status"]), exact["comment"]
        for status in ("skip", "xfail"):
            for _, entry in migrated:
                if entry["status"] == status:
                    return status, entry["comment"]
        return "success", ""

    def judge(self, op, check, passed):
        """Outcome of one run: passed, failed, xfailed, xpassed (strict: a failure) or skipped."""
        status, _ = self.expected(op, check)
        if status == "skip":
            return "skipped"
        if status == "xfail":
            return "xpassed" if passed else "xfailed"
        return "passed" if passed else "failed"

    def outcome(self, op, check, status):
        """judge() for a check result's status: "passed", "failed" or "skipped" (not run)."""
        return "skipped" if status == "skipped" else self.judge(op, check, status == "passed")

    def requires_autograd(self, op):
        """Does the store make a missing gradient formula on ``op`` a failure (its
        ``require_autograd`` setting)?"""
        return REQUIRE_AUTOGRAD in self.data.get(normalize_op(op), {})

    def accept(self, op, check, passed, message=""):
        """Make the store expect this result; True if anything changed. Skip entries are never touched."""
        op = normalize_op(op)
        status, _ = self.expected(op, check)
        if status == "skip" or (status == "xfail") != passed:
            return False  # already expected (a failing xfail keeps its comment)
        tests = self.data.setdefault(op, {})
        if not passed:
            entry = tests.setdefault(_key(check), {"comment": "", "status": "xsuccess"})
            entry["status"] = "xfail"
            # A comment already there (a human's note on an xsuccess entry) is kept, never overwritten.
            entry["comment"] = entry["comment"] or _comment(message)
            return True
        exact, migrated = self._matching(op, check)
        entries = ([(_key(check), exact)] if exact is not None else []) + migrated
        for name, entry in entries:
            if entry["status"] != "xfail":
                continue
            if entry["comment"] and not entry["comment"].startswith(_AUTO):
                entry["status"] = "xsuccess"  # keep a human's explanation; xsuccess is the default anyway
            else:
                # PyTorch's convention: a bare xsuccess entry is just removed. So is one
                # whose comment we wrote ourselves: it described a failure that is gone.
                del tests[name]
        if not tests:
            del self.data[op]
        return True

    def to_text(self):
        """The exact text of the file, serialized as PyTorch serializes failures_dict.json."""
        obj = {"_description": self.description, "_version": VERSION, "data": self.data}
        return json.dumps(obj, indent=2, sort_keys=True) + "\n"

    def save(self):
        """Write atomically: readers never see half a file."""
        write_text(self.path, self.to_text())


def _public(status):
    return "success" if status == "xsuccess" else status


def _parse(path, obj):
    """Validate a decoded file; returns (data, description) with statuses normalized."""
    if not isinstance(obj, dict):
        raise StoreError(f"{path}: expected a JSON object at top level")
    unknown = sorted(set(obj) - {"_description", "_version", "data"})
    if unknown:
        # Saving would drop them silently, so refuse instead.
        raise StoreError(f"{path}: unexpected top-level key(s) {', '.join(map(repr, unknown))}")
    if "data" not in obj:
        raise StoreError(f"{path}: missing 'data'")
    if obj.get("_version") != VERSION:
        raise StoreError(f"{path}: '_version' is {obj.get('_version')!r}, expected {VERSION}")
    description = obj.get("_description", DESCRIPTION)
    if not isinstance(description, str):
        raise StoreError(f"{path}: '_description' must be a string")
    data = obj["data"]
    if not isinstance(data, dict):
        raise StoreError(f"{path}: 'data' must be an object mapping op to tests")
    for op, tests in data.items():
        if not isinstance(tests, dict):
            raise StoreError(f"{path}: op {op!r}: expected an object mapping test name to entry")
        for test, entry in tests.items():
            if test == REQUIRE_AUTOGRAD:
                _check_require_autograd(path, op, entry)
                if normalize_op(op) != op:  # looked up under the bare name: this one would be ignored
                    raise StoreError(f"{path}: op {op!r}: write it as {normalize_op(op)!r} (the default overload "
                                     "is stored under the bare name), or the require_autograd setting is never read")
                continue
            where = f"{path}: op {op!r}, test {test!r}"
            if not isinstance(entry, dict) or set(entry) != {"comment", "status"}:
                raise StoreError(f"{where}: expected an object with exactly 'comment' and 'status'")
            if not isinstance(entry["comment"], str):
                raise StoreError(f"{where}: 'comment' must be a string")
            status = entry["status"]
            if status not in _READ_STATUSES:
                raise StoreError(f"{where}: unknown status {status!r}; expected xfail, skip or xsuccess")
            entry["status"] = _READ_STATUSES[status]
    return data, description


def _check_require_autograd(path, op, entry):
    """The per-op setting must be exactly {"comment": str, "status": "required"}: a typo
    in a setting that makes failures must not pass unnoticed. Kept as written (no
    normalizing), so the file round-trips byte for byte."""
    shape = f'{{"comment": "<why>", "status": "{_REQUIRED}"}}'
    where = f"{path}: op {op!r}, {REQUIRE_AUTOGRAD!r}"
    if not isinstance(entry, dict) or set(entry) != {"comment", "status"}:
        raise StoreError(f"{where}: expected {shape}, got {json.dumps(entry)[:80]}")
    if not isinstance(entry["comment"], str):
        raise StoreError(f"{where}: 'comment' must be a string")
    if entry["status"] != _REQUIRED:
        raise StoreError(f"{where}: status {entry['status']!r}; the only status of this setting is "
                         f"{_REQUIRED!r} (remove the key to leave autograd optional)")


def apply_results(path, results):
    """Accept results into the file at path, safely against other processes doing the same.

    pytest-xdist workers each call this at the end: under an exclusive lock the file is
    reread from disk, so what another worker wrote in between is kept, not overwritten,
    and replaced atomically, so a writer killed at any point leaves the old file or the
    new one, never half (its temporary file is removed by the next writer).
    """
    import fcntl  # POSIX only; imported here so the module itself stays importable anywhere

    results = list(results)  # consume a generator before taking the lock
    # A separate lock file: the store itself is replaced on save, and a lock on a replaced inode locks nothing.
    with open(str(path) + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _remove_dead_writers_files(path)
            store = XfailStore.load(path)
            changed = False
            for op, check, passed, message in results:
                changed |= store.accept(op, check, passed, message)
            if changed:
                store.save()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return store


def _remove_dead_writers_files(path):
    """The temporary files (corpus.atomic.write_text's) of writers killed between write and
    replace. Called under the lock: every writer holds it, so no live writer owns one."""
    folder, name = os.path.split(os.path.abspath(str(path)))
    try:
        leftovers = [f for f in os.listdir(folder) if f.startswith(f".{name}.") and f.endswith(".tmp")]
    except OSError:
        return
    for leftover in leftovers:
        try:
            os.unlink(os.path.join(folder, leftover))
        except OSError:
            pass


def merge_results(results):
    """One (op, check, passed, message) per pair: it failed if any worker saw it fail (with that message)."""
    merged = {}
    for op, check, passed, message in results:
        key = (normalize_op(op), check)
        _key(check)  # reject unknown checks here, not later in accept()
        if key not in merged or (merged[key][0] and not passed):
            merged[key] = (passed, message)
    order = sorted(merged, key=lambda k: (k[0], CHECKS.index(k[1])))
    return [(op, check, *merged[op, check]) for op, check in order]
