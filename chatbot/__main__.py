"""`python -m chatbot` runs the CLI."""

from .cli import run

run()
