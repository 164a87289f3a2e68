"""`python -m chatbot` runs the CLI."""

from chatbot.serve.cli import run

run()
