# Makes `tests/` importable as a path root so tests can `from fakes.anthropic_server import ...`
# without a tests package and without editing pyproject's pytest settings.
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
