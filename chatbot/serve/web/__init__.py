"""The web UI (Gradio)."""

import os

# Gradio reads this when it is imported, and every module here imports it after this package:
# analytics would look up outside hosts.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
