"""Harnesses and cases the tests share."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository, wherever a test file sits
