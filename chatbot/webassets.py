"""The web UI's own style sheet and page script, kept apart from its Python handlers."""

CSS = """
#sources .sources-scroll { max-height: 78vh; overflow-y: auto; overscroll-behavior: contain; }
@media (min-width: 900px) {
  #sources-col { position: sticky; top: 8px; align-self: flex-start; }
}
#sources .answer-pick { font-size: 0.9em; margin-bottom: 6px; }
#sources .answer-pick a { padding: 0 4px; }
#sources .for-question { font-size: 0.9em; margin-bottom: 8px;
  color: var(--body-text-color-subdued); }
#sources .source { border: 1px solid var(--border-color-primary); border-radius: 8px;
  padding: 8px 12px; margin-bottom: 10px; }
#sources .source.target { border-color: var(--color-accent);
  box-shadow: 0 0 0 2px var(--color-accent-soft); }
#sources .source-head { font-weight: 600; }
#sources .relevance { white-space: nowrap; }
#sources meter { width: 5em; height: 0.8em; vertical-align: middle; }
#sources .badge { font-size: 0.8em; font-weight: 400; padding: 0 6px; border-radius: 8px;
  background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
#sources .meta { font-size: 0.85em; color: var(--body-text-color-subdued); margin: 2px 0 6px; }
#sources .passage { white-space: pre-wrap; margin: 0; font-size: 0.92em; max-height: 16em;
  overflow-y: auto; }
#sources mark { background: var(--color-accent-soft); color: inherit; border-radius: 2px; }
#sources details summary { cursor: pointer; font-size: 0.88em; margin-top: 4px;
  color: var(--link-text-color); }
#sources details .passage { margin-top: 4px; }
/* On a phone the corpus table scrolls within its box, not the page sideways. */
#corpus-table .table-scroll { overflow-x: auto; max-width: 100%; }
/* On a phone the sources sit below the chat: a link at the top of the panel leads back. */
#sources .back-to-answer { display: block; position: sticky; top: 0; z-index: 1;
  padding: 6px 0; text-align: left; background: var(--block-background-fill); }
@media (min-width: 900px) { #sources .back-to-answer { display: none; } }
/* The quote of a citation link that has keyboard focus (hovering shows its title). */
#quote-tip { position: absolute; z-index: 1000; max-width: min(28em, 90vw); padding: 6px 10px;
  border-radius: 6px; background: #1f2937; color: #f9fafb; font-size: 0.85em; line-height: 1.4;
  box-shadow: 0 2px 8px rgba(0, 0, 0, 0.3); pointer-events: none; }
#quote-tip[hidden] { display: none; }
#chat .unsupported { cursor: help; color: #b45309; }
#question-count { font-size: 0.85em; text-align: right; margin-top: -8px; }
#corpus-list td, #corpus-list th { padding: 4px 8px; text-align: left; vertical-align: top; }
.hint { color: var(--body-text-color-subdued); }
.narrowed { color: var(--body-text-color-subdued); margin: 0.2em 0 0.4em; }
/* Gradio shows feedback buttons on every reply; a reply that is not an answer hides them. */
#chat .message-row:has(.no-feedback) + .message-buttons [aria-label^='Like'],
#chat .message-row:has(.no-feedback) + .message-buttons [aria-label^='Dislike'] {
  display: none; }
"""

# `[n]` in an answer shows that answer's sources and source n within the sources panel's own
# scroll box, its quote in view in the card; the page itself moves only when the panel is off
# screen (on a phone it sits below the chat, and a link at the panel's top leads back to the
# answer). Links picking an answer's sources show its section.
JS = r"""
() => {
  const inPanel = (scroller, el, pad = 0) => {
    const top = el.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
    scroller.scrollTop += top - 8 - pad;
  };
  let followed = null;  // the [n] link last followed, for the way back to it
  const backToAnswer = (link) => {
    const answer = Number(link.dataset.answer);
    const bot = document.querySelectorAll("#chat [data-testid='bot']")[answer - 1];
    const cited = followed && followed.isConnected && bot && bot.contains(followed);
    const target = cited ? followed : bot;
    if (!target) return;
    target.scrollIntoView({block: 'center'});
    if (cited) followed.focus({preventScroll: true});
  };
  document.addEventListener('click', (event) => {
    const back = event.target.closest && event.target.closest('a.back-to-answer');
    if (back) {
      event.preventDefault();
      backToAnswer(back);
      return;
    }
    const link = event.target.closest
      && event.target.closest('a[href^="#src-"], a[href^="#answer-"]');
    if (!link) return;
    event.preventDefault();
    event.stopPropagation();
    const target = document.getElementById(link.getAttribute('href').slice(1));
    const section = target && target.closest('#sources .answer-sources');
    if (!section) return;
    if (link.closest('#chat')) followed = link;
    document.querySelectorAll('#sources .answer-sources')
      .forEach((s) => { s.hidden = s !== section; });
    document.querySelectorAll('#sources .source.target')
      .forEach((el) => el.classList.remove('target'));
    const scroller = section.closest('.sources-scroll');
    const box = scroller.getBoundingClientRect();
    if (box.top < 0 || box.top > window.innerHeight * 0.6) {
      scroller.scrollIntoView({block: 'start'});
    }
    if (target === section) { scroller.scrollTop = 0; return; }
    target.classList.add('target');
    // On a phone the way back to the answer stays at the top of the panel: keep the card below.
    const way = section.querySelector('.back-to-answer');
    inPanel(scroller, target, way ? way.offsetHeight : 0);
    const mark = target.querySelector('.passage mark');
    if (mark) inPanel(mark.closest('.passage'), mark);
  }, true);
  // Hovering [n] shows its quote (the link's title); keyboard focus shows it too, in a tooltip
  // that the focused link names with aria-describedby, so a screen reader reads it as well.
  const tip = document.createElement('div');
  tip.id = 'quote-tip';
  tip.setAttribute('role', 'tooltip');
  tip.hidden = true;
  document.body.appendChild(tip);
  const citation = (el) => el.closest && el.closest('#chat a[href^="#src-"][title]');
  document.addEventListener('focusin', (event) => {
    const link = citation(event.target);
    if (!link) return;
    tip.textContent = link.getAttribute('title');
    link.setAttribute('aria-describedby', 'quote-tip');
    tip.hidden = false;
    const r = link.getBoundingClientRect();
    const left = Math.max(8, Math.min(r.left, window.innerWidth - tip.offsetWidth - 8));
    tip.style.left = `${left + window.scrollX}px`;
    tip.style.top = `${r.bottom + window.scrollY + 6}px`;
  });
  document.addEventListener('focusout', (event) => {
    if (citation(event.target)) tip.hidden = true;
  });
  // Gradio's copy button copies a message's Markdown, links and all: copy an answer as plain
  // text instead, its [n] markers then its sources as footnotes.
  const plainAnswer = (text) => {
    let answer = null;
    const used = [];
    const plain = text
      .replace(/\[\[(\d+)\]\]\(#src-(\d+)-\d+(?: "[^"]*")?\)/g, (m, n, a) => {
        answer = a;
        if (!used.includes(n)) used.push(n);
        return `[${n}]`;
      })
      .replace(/<span class='no-feedback'><\/span>/g, '')
      .replace(/<span class='unsupported'[^>]*title='([^']*)'>⚠<\/span>/g, '⚠ ($1)');
    if (answer === null) return plain;
    const notes = used.map((n) => {
      const head = document.querySelector(`#src-${answer}-${n} .source-head`);
      return head ? head.innerText.trim() : `[${n}]`;
    });
    return `${plain}\n\n${notes.join('\n')}`;
  };
  const clip = navigator.clipboard;
  if (clip && clip.writeText) {
    const write = clip.writeText.bind(clip);
    clip.writeText = (text) => write(plainAnswer(String(text)));
  }
}
"""

# Saves the conversation file the server made on request ({name, text}) from the page itself.
SAVE_JS = """
(file) => {
  if (!file || !file.name) return;
  const url = URL.createObjectURL(new Blob([file.text], {type: 'text/markdown;charset=utf-8'}));
  const link = document.createElement('a');
  link.href = url;
  link.download = file.name;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
"""
