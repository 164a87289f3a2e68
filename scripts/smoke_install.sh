#!/usr/bin/env bash
# The package outside its checkout, as `pip install` gives it to a user: build the wheel, install
# it in a fresh virtual environment in a temporary folder, and from another folder (no checkout on
# sys.path, a data directory of its own, no .env, no CHATBOT_* or OPENAI_* variables) run
# `chatbot info`, `chatbot ask` (the answer must cite a source) and `chatbot serve` (the page must
# answer 200). pip's own cache is used, so a second run downloads and builds nothing new.
#
#     bash scripts/smoke_install.sh          # PYTHON=python3.12 to try another interpreter
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
TMP=$(mktemp -d -t chatbot-smoke-XXXXXX)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() { echo "smoke_install: $*" >&2; exit 1; }
step() { echo "--- $* ($(date +%T))"; }

step "build the wheel from a copy of the source (no build output lands in the checkout)"
mkdir "$TMP/src"
cp -r "$ROOT"/{pyproject.toml,README.md,LICENSE,MANIFEST.in,build_backend,chatbot,prompts,corpus} "$TMP/src/"
# The build fetches the embedding model itself (build_backend/chatbot_build.py): drop the
# checkout's copy so that step is what is tried.
rm -rf "$TMP/src/chatbot/_model"
find "$TMP/src" -name __pycache__ -prune -exec rm -rf {} +
"$PYTHON" -m venv "$TMP/venv"
pip=("$TMP/venv/bin/pip" -q --disable-pip-version-check)
"${pip[@]}" wheel --no-deps -w "$TMP/dist" "$TMP/src"
wheel=$(ls "$TMP"/dist/icml_chatbot-*.whl)

step "install $(basename "$wheel") in a fresh virtual environment (one step: it carries the model)"
"${pip[@]}" install "$wheel"
! "$TMP/venv/bin/python" -c 'import torch' 2>/dev/null || fail "torch was installed"

mkdir "$TMP/elsewhere" "$TMP/home"
cd "$TMP/elsewhere"
user=(env -i PATH="$TMP/venv/bin:/usr/bin:/bin" HOME="$TMP/home" LANG=C.UTF-8
  CHATBOT_DATA_DIR="$TMP/data" GRADIO_ANALYTICS_ENABLED=False)
where=$("${user[@]}" python -c 'import chatbot; print(chatbot.__file__)')
[[ $where == "$TMP/venv/"* ]] || fail "chatbot was imported from $where, not from the install"

step "chatbot info"
"${user[@]}" chatbot info

step "chatbot ask (indexes the corpus shipped in the wheel on first use)"
answer=$("${user[@]}" chatbot ask "What is generative social choice?") || fail "ask failed"
echo "$answer"
grep -q '\[1\]' <<<"$answer" || fail "the answer cites no source"
grep -q '^Sources:' <<<"$answer" || fail "the answer lists no sources"
documents=$("${user[@]}" chatbot info --json | "$TMP/venv/bin/python" -c \
  'import json, sys; print(json.load(sys.stdin)["documents"])')
[ "$documents" = 20 ] || fail "the index holds $documents documents, not the 20 summaries"

step "chatbot serve"
port=$("$TMP/venv/bin/python" -c \
  'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${user[@]}" chatbot serve --port "$port" >"$TMP/serve.log" 2>&1 &
SERVER=$!
code=
for _ in $(seq 120); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)
  [ "$code" = 200 ] && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$TMP/serve.log" >&2; fail "chatbot serve exited"; }
  sleep 1
done
[ "$code" = 200 ] || { cat "$TMP/serve.log" >&2; fail "the page answered ${code:-nothing}"; }
echo "http://127.0.0.1:$port/ answered 200"
kill "$SERVER"
wait "$SERVER" 2>/dev/null || true
SERVER=
step "the installed package works outside its checkout"
