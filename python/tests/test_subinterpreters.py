"""duro._duro refuses to load in a sub-interpreter (its state is
process-wide and its threads take the GIL with PyGILState_Ensure), and a
second import in the main interpreter gets the first one's objects. Run in
a child process: a sub-interpreter can leave the process unstable (3.12's
own _datetime crashes one), and the test's process must not depend on it."""
import subprocess
import sys

import pytest

CHILD = r"""
import importlib.machinery, importlib.util, sys
try:
    import _interpreters as interpreters          # 3.13+
except ImportError:
    import _xxsubinterpreters as interpreters     # 3.10 - 3.12
import duro._duro as first
path = first.__file__
del sys.modules["duro._duro"]
import duro._duro as second
assert second.Error is first.Error and second.Task is first.Task
# Load the extension alone from its file, so the sub-interpreter imports
# no other module (the package's own imports are not what is tested).
code = f'''
import importlib.machinery, importlib.util
loader = importlib.machinery.ExtensionFileLoader("duro._duro", {path!r})
spec = importlib.util.spec_from_file_location("duro._duro", {path!r},
                                              loader=loader)
module = importlib.util.module_from_spec(spec)
loader.exec_module(module)
'''
# The default interpreter (its own GIL from 3.12 on), then one sharing the
# main GIL where this Python can make both (3.12: isolated=False; 3.13+:
# the "legacy" config): there duro's own check is what refuses.
makers = [interpreters.create]
if hasattr(interpreters, "new_config"):
    legacy = interpreters.new_config("legacy")
    makers.append(lambda: interpreters.create(legacy))
elif sys.version_info >= (3, 12):
    makers.append(lambda: interpreters.create(isolated=False))
for make in makers:
    interp = make()
    try:
        result = interpreters.run_string(interp, code)
        print("RESULT", result)  # 3.13+ returns what was raised
    except Exception as e:        # 3.10 - 3.12 raise RunFailedError
        print("RAISED", e)
    interpreters.destroy(interp)
print("MAIN", first.DURO_VERSION)
"""


def test_refuses_sub_interpreters():
    try:
        import _interpreters  # noqa: F401
    except ImportError:
        pytest.importorskip("_xxsubinterpreters",
                            reason="this Python has no sub-interpreter module")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1].startswith("MAIN "), out.stdout
    refusals = lines[:-1]
    assert refusals, out.stdout
    for refusal in refusals:
        assert "ImportError" in refusal, out.stdout
        # Ours (3.10, 3.11, an interpreter sharing the main GIL), or the
        # import machinery's for one with its own GIL (3.12+).
        assert ("cannot be imported in a sub-interpreter" in refusal
                or "does not support loading in subinterpreters"
                in refusal), out.stdout
    assert "cannot be imported in a sub-interpreter" in out.stdout
