"""docs/python.md runs as written: its Python cells, top to bottom, as the script the page says to
write (under `if __name__ == "__main__":`, with the default processes executor)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "python.md"
CELL = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


@pytest.mark.slow
def test_the_python_page_runs_as_a_script(tmp_path):
    cells = CELL.findall(PAGE.read_text())
    assert len(cells) >= 4
    body = textwrap.indent("\n".join(cells), "    ")
    script = tmp_path / "page.py"
    script.write_text(f'if __name__ == "__main__":\n{body}')
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert (tmp_path / "python-demo.html").exists()
    assert re.search(r"^nominal (0\.\d+) \1$", out, re.MULTILINE), out[-3000:]  # the cell's own tvd_2way
    assert "SchemaError" in out and "column 'age': values outside the public bounds [17, 90]" in out
