"""``%%rlx`` without a kernel: which function it compiles, which inputs it says it used, and
the typed errors it shows instead of tracebacks (issue 30)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlx_core.targets.registry import UnknownTargetError
from rlx_explorer import magics

HEAD = '''
import numpy as np
import rlx_core as rlx
W = np.ones((3, 2), np.float32)
def layer(x, w):
    return rlx.nn.relu(x @ w)
'''


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    out: list[Any] = []
    monkeypatch.setattr(magics, "_show", out.append)
    return out


def _notes(shown: list[Any]) -> list[str]:
    return [o.data for o in shown if hasattr(o, "data") and "%%rlx: compiled" in str(o.data)]


def test_compiles_model_not_its_helpers(shown: list[Any]) -> None:
    cell = HEAD + "def model(x):\n    return layer(x, W)\n" \
        "def example_inputs():\n    return (np.ones((4, 3), np.float32),)\n"
    ns: dict[str, Any] = {}
    [ex] = magics.run_cell("--target numpy", cell, ns)
    assert ex.bundle["title"] == "model" and not ex.bundle["failures"]
    [note] = _notes(shown)
    assert "compiled model at example_inputs() from this cell: f32[4,3]" in note


def test_last_call_compiles_that_function_at_those_arguments(shown: list[Any]) -> None:
    cell = HEAD + "x = np.ones((5, 3), np.float32)\nlayer(x, W)\n"
    [ex] = magics.run_cell("", cell, {})
    assert ex.bundle["title"] == "layer"
    assert "last line, layer(x, W): f32[5,3], f32[3,2]" in _notes(shown)[0]


def test_fn_flag_and_inputs_from_an_earlier_cell(shown: list[Any]) -> None:
    ns: dict[str, Any] = {}
    magics.run_cell("", "import numpy as np\ndef model(x):\n    return x * 2\n"
                    "def example_inputs():\n    return np.ones((2,), np.float32)\n", ns)
    [ex] = magics.run_cell("--fn enc", "def enc(x):\n    return x + 1\n"
                           "def dec(x):\n    return x - 1\n", ns)
    assert ex.bundle["title"] == "enc"
    assert "example_inputs() from an earlier cell" in _notes(shown)[-1]


def test_several_functions_without_model_ask_which(shown: list[Any]) -> None:
    with pytest.raises(magics.CellTargetError) as info:
        magics.run_cell("", "def a(x):\n    return x\ndef b(x):\n    return x\n", {})
    assert info.value.code == "RLX-E102" and "--fn NAME" in info.value.hint


def test_fn_naming_no_function(shown: list[Any]) -> None:
    with pytest.raises(magics.CellTargetError, match="no function 'nope'"):
        magics.run_cell("--fn nope", "def a(x):\n    return x\n", {})


def test_unknown_target_gives_the_cli_message_before_running_the_cell(shown: list[Any]) -> None:
    ns: dict[str, Any] = {}
    with pytest.raises(UnknownTargetError) as info:
        magics.run_cell("--target gpu", "ran = True\n", ns)
    assert "unknown target 'gpu'" in str(info.value) and "numpy" in info.value.hint
    assert "ran" not in ns


def test_errors_are_shown_in_the_notebook_not_raised(shown: list[Any]) -> None:
    class Shell:
        user_ns: dict[str, Any] = {}
        registered: Any = None

        def register_magic_function(self, fn: Any, **_: Any) -> None:
            self.registered = fn

    shell = Shell()
    magics.register(shell)
    shell.registered("--target gpu", "x = 1\n")
    [err] = shown
    assert "[RLX-X002] unknown target &#x27;gpu&#x27;" in err.data and "choose one of" in err.data


def test_trailing_print_still_runs(shown: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    cell = "import numpy as np\ndef model(x):\n    return x * 2\n" \
        "def example_inputs():\n    return (np.ones(2, np.float32),)\nprint('hello')\n"
    [ex] = magics.run_cell("", cell, {})
    assert ex.bundle["title"] == "model" and "hello" in capsys.readouterr().out
    assert np.asarray(ex.session.args[0]).shape == (2,)


def test_long_work_reports_each_stage(capsys: pytest.CaptureFixture[str]) -> None:
    from rlx_explorer import explore
    from rlx_explorer.progress import terminal

    stages: list[str] = []
    bundle = explore(lambda x: x * 2, np.ones(3, np.float32), targets="numpy,cpu", run=False,
                     progress=stages.append).bundle
    assert not bundle["failures"]
    assert stages[:2] == ["compiling for numpy (1/2)", "compiling for cpu (2/2)"]
    assert stages[2].startswith("building the views")
    # then every target the session did not compile is rendered without its device, each said
    rendered = [st for st in stages[3:] if st.startswith("rendering ")]
    assert rendered and rendered == stages[3:], stages
    assert any("cuda's source without its device" in st for st in rendered)
    terminal()("compiling for cpu (1/1)")
    assert "s] compiling for cpu (1/1)" in capsys.readouterr().err


def test_the_note_reads_in_text_only_frontends(shown: list[Any]) -> None:
    magics.run_cell("", "import numpy as np\ndef model(x):\n    return x * 2\n"
                    "model(np.ones(2, np.float32))\n", {})
    note = next(o for o in shown if isinstance(o, magics.Note))
    bundle = note._repr_mimebundle_()
    assert bundle["text/plain"].startswith("%%rlx: compiled model at the arguments")
    assert "cell&#x27;s last line" in bundle["text/html"]
