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
/* After [n] was followed, its own sentence stands out; the source's other quotes step back. */
#sources .source.picked mark { background: transparent;
  text-decoration: underline dotted var(--body-text-color-subdued); }
#sources .source.picked mark.current { background: #fde047; color: #111827;
  text-decoration: none; box-shadow: 0 0 0 2px #fde047; }
#sources .flags { font-size: 0.88em; margin: 0 0 8px; padding: 6px 10px; border-radius: 6px;
  background: var(--background-fill-secondary); }
#sources .flags p { margin: 0; color: #b45309; }
#sources .flags ul { margin: 2px 0 0; padding-left: 1.2em; }
#sources details summary { cursor: pointer; font-size: 0.88em; margin-top: 4px;
  color: var(--link-text-color); }
#sources details .passage { margin-top: 4px; }
/* On a phone the corpus table scrolls within its box, not the page sideways; a narrow screen
   shows each document as a block of lines, so no column is cut off at the edge. */
#corpus-table .table-scroll { overflow-x: auto; max-width: 100%; }
@media (max-width: 640px) {
  #corpus-list, #corpus-list tbody, #corpus-list tr, #corpus-list td { display: block; }
  #corpus-list tr:first-child { display: none; }
  #corpus-list tr { padding: 6px 0; border-bottom: 1px solid var(--border-color-primary); }
  #corpus-list td { border: none; padding: 1px 4px; overflow-wrap: anywhere; }
  #corpus-list td:first-child { font-weight: 600; }
}
/* On a phone the sources sit below the chat: a link at the top of the panel leads back. */
#sources .back-to-answer { display: block; position: sticky; top: 0; z-index: 1;
  padding: 6px 0; text-align: left; background: var(--block-background-fill); }
@media (min-width: 900px) { #sources .back-to-answer { display: none; } }
/* The quote of [n], or why ⚠ flags a sentence: on hover, keyboard focus or a tap on ⚠. */
#quote-tip { position: absolute; z-index: 1000; max-width: min(28em, 90vw); padding: 6px 10px;
  border-radius: 6px; background: #1f2937; color: #f9fafb; font-size: 0.85em; line-height: 1.4;
  box-shadow: 0 2px 8px rgba(0, 0, 0, 0.3); pointer-events: none; }
#quote-tip[hidden] { display: none; }
#chat .unsupported { cursor: help; color: #b45309; text-decoration: none; }
#question-count { font-size: 0.85em; text-align: right; margin-top: -8px; }
#question-count .over { color: #b91c1c; font-weight: 600; }
/* An answer being written offers no copy or votes until it is complete. */
#chat .message-row:has(.writing) + .message-buttons { display: none; }
/* Touch: icons and [n] are 44 px targets; [n] keeps the room it takes in the line (negative
   margins), so the text around it does not move apart. */
@media (pointer: coarse) {
  #chat button.icon-button { min-width: 44px; min-height: 44px; }
  #chat a[href^='#src-'], #chat a.unsupported { display: inline-block; min-width: 44px;
    min-height: 44px; line-height: 44px; margin: -12px -10px; text-align: center;
    vertical-align: middle; position: relative; }
}
#corpus-list td, #corpus-list th { padding: 4px 8px; text-align: left; vertical-align: top; }
.hint { color: var(--body-text-color-subdued); }
.narrowed { color: var(--body-text-color-subdued); margin: 0.2em 0 0.4em; }
/* Gradio shows feedback buttons on every reply; a reply that is not an answer hides them. */
#chat .message-row:has(.no-feedback) + .message-buttons [aria-label^='Like'],
#chat .message-row:has(.no-feedback) + .message-buttons [aria-label^='Dislike'] {
  display: none; }
"""

# `[n]` in an answer shows that answer's sources and source n within the sources panel's own
# scroll box, the sentence(s) backing that marker lit up in the card (the link names their
# spans: `#src-1-2:0,3`); the page itself moves only when the panel is off screen (on a phone it
# sits below the chat, and a link at the panel's top leads back to the answer). Links picking an
# answer's sources show its section. The quote of `[n]` and the reason for ⚠ show in one tooltip
# of the page's own: on hover, on keyboard focus, or on a tap of ⚠; never after a click on `[n]`,
# whose source the panel then shows. Native titles are moved aside (they cannot be dismissed),
# and each message is labelled with its text rather than its Markdown.
JS = r"""
() => {
  const inPanel = (scroller, el, pad = 0) => {
    const top = el.getBoundingClientRect().top - scroller.getBoundingClientRect().top;
    scroller.scrollTop += top - 8 - pad;
  };
  window.questionCounter = (text, limit, refused) => {
    const n = (text || '').length;
    const fmt = (x) => x.toLocaleString('en-US');
    if (n <= limit) return `<span class='hint'>${fmt(n)} / ${fmt(limit)} characters</span>`;
    // Over the limit: say by how much, and bring the counter into view.
    requestAnimationFrame(() => {
      const count = document.querySelector('#question-count');
      const r = count && count.getBoundingClientRect();
      const below = r ? r.bottom - window.innerHeight : 0;
      if (below > 0) window.scrollBy(0, below + 12);
      if (r && r.top < 0) window.scrollBy(0, r.top - 12);
    });
    const what = refused ? ': shorten the question to send it' : '';
    return `<span class='over' role='alert'>${fmt(n)} / ${fmt(limit)} characters, `
      + `${fmt(n - limit)} over the limit${what}</span>`;
  };
  // The chat follows the question just asked (Gradio's own autoscroll is off): it scrolls
  // with the answer as it is written until the question reaches the top of the chat, so both
  // show even if the chat had been scrolled up, and a long answer is read from its start.
  // The following ends with the answer, or when the chat is scrolled by hand.
  let follow = null;  // the index of the question followed
  let bringIntoPage = false;
  const keepInView = () => {
    if (follow === null) return;
    const wrap = document.querySelector('#chat .bubble-wrap');
    const asked = document.querySelectorAll("#chat [data-testid='user']")[follow];
    if (!wrap || !asked) return;
    const row = asked.closest('.message-row') || asked;
    const box = wrap.getBoundingClientRect();
    // The chat's label and icons float over its top: the question goes just below them.
    const floating = '#chat .top-panel, #chat [data-testid="block-label"]';
    const over = [...document.querySelectorAll(floating)]
      .map((el) => el.getBoundingClientRect().bottom - box.top);
    const top = row.getBoundingClientRect().top - box.top - Math.max(0, ...over) - 8;
    const want = Math.min(wrap.scrollTop + top, wrap.scrollHeight - wrap.clientHeight);
    if (Math.abs(wrap.scrollTop - want) > 1) wrap.scrollTop = want;
    if (bringIntoPage) {
      bringIntoPage = false;
      row.scrollIntoView({block: 'nearest'});
    }
    const reply = document.querySelectorAll("#chat [data-testid='bot']")[follow];
    if (reply && !reply.querySelector('.writing') && !document.querySelector('#stop')) {
      follow = null;
    }
  };
  window.followChat = () => {
    follow = document.querySelectorAll("#chat [data-testid='user']").length;
    bringIntoPage = true;
  };
  const byHand = (event) => {
    if (event.target.closest && event.target.closest('#chat .bubble-wrap')) follow = null;
  };
  document.addEventListener('wheel', byHand, {passive: true});
  document.addEventListener('touchmove', byHand, {passive: true});
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
  const tip = document.createElement('div');
  tip.id = 'quote-tip';
  tip.setAttribute('role', 'tooltip');
  tip.hidden = true;
  document.body.appendChild(tip);
  let tipFor = null;
  let pinned = false;
  const tipTarget = (el) => el && el.closest && el.closest('#chat a[data-tip]');
  const hideTip = () => {
    if (tipFor) tipFor.removeAttribute('aria-describedby');
    tip.hidden = true;
    tipFor = null;
    pinned = false;
  };
  // Below the link (above it when the screen ends), kept over the chat: never over the sources.
  const showTip = (el) => {
    const chat = document.querySelector('#chat');
    if (!el.dataset.tip || !chat) return;
    const area = chat.getBoundingClientRect();
    tip.textContent = el.dataset.tip;
    tip.style.maxWidth = `${Math.min(area.width - 16, 448)}px`;
    tip.hidden = false;
    el.setAttribute('aria-describedby', 'quote-tip');
    tipFor = el;
    const r = el.getBoundingClientRect();
    const left = Math.max(area.left + 8, Math.min(r.left, area.right - tip.offsetWidth - 8));
    const below = r.bottom + 6 + tip.offsetHeight <= window.innerHeight;
    const top = below ? r.bottom + 6 : r.top - 6 - tip.offsetHeight;
    tip.style.left = `${left + window.scrollX}px`;
    tip.style.top = `${top + window.scrollY}px`;
  };
  document.addEventListener('click', (event) => {
    const back = event.target.closest && event.target.closest('a.back-to-answer');
    if (back) {
      event.preventDefault();
      backToAnswer(back);
      return;
    }
    const flag = event.target.closest && event.target.closest('#chat a.unsupported');
    if (flag) {  // a tap or click on ⚠ says why, until the next tap elsewhere
      event.preventDefault();
      event.stopPropagation();
      const again = pinned && tipFor === flag;
      hideTip();
      if (!again) { showTip(flag); pinned = true; }
      return;
    }
    hideTip();
    const link = event.target.closest
      && event.target.closest('a[href^="#src-"], a[href^="#answer-"]');
    if (!link) return;
    event.preventDefault();
    event.stopPropagation();
    const [id, picks] = link.getAttribute('href').slice(1).split(':');
    const target = document.getElementById(id);
    const section = target && target.closest('#sources .answer-sources');
    if (!section) return;
    if (link.closest('#chat')) followed = link;
    document.querySelectorAll('#sources .answer-sources')
      .forEach((s) => { s.hidden = s !== section; });
    document.querySelectorAll('#sources .source.target, #sources .source.picked')
      .forEach((el) => el.classList.remove('target', 'picked'));
    document.querySelectorAll('#sources mark.current')
      .forEach((el) => el.classList.remove('current'));
    const scroller = section.closest('.sources-scroll');
    const box = scroller.getBoundingClientRect();
    if (box.top < 0 || box.top > window.innerHeight * 0.6) {
      scroller.scrollIntoView({block: 'start'});
    }
    if (target === section) { scroller.scrollTop = 0; return; }
    target.classList.add('target');
    if (picks) {
      target.classList.add('picked');
      for (const k of picks.split(',')) {
        target.querySelectorAll(`mark[data-span='${k}']`)
          .forEach((m) => m.classList.add('current'));
      }
    }
    // On a phone the way back to the answer stays at the top of the panel: keep the card below.
    const way = section.querySelector('.back-to-answer');
    inPanel(scroller, target, way ? way.offsetHeight : 0);
    const mark = target.querySelector('.passage mark.current')
      || target.querySelector('.passage mark');
    if (mark) inPanel(mark.closest('.passage'), mark);
  }, true);
  document.addEventListener('pointerover', (event) => {
    const el = tipTarget(event.target);
    if (el && event.pointerType === 'mouse' && !pinned) showTip(el);
  });
  document.addEventListener('pointerout', (event) => {
    const el = tipTarget(event.target);
    if (el && el === tipFor && !pinned && !el.contains(event.relatedTarget)) hideTip();
  });
  // Keyboard focus shows the tooltip too; focus that a click or tap gives a link does not.
  document.addEventListener('focusin', (event) => {
    const el = tipTarget(event.target);
    if (el && el.matches(':focus-visible')) showTip(el);
  });
  document.addEventListener('focusout', (event) => {
    if (tipTarget(event.target) === tipFor && !pinned) hideTip();
  });
  document.addEventListener('keydown', (event) => { if (event.key === 'Escape') hideTip(); });
  // What the question box holds the moment Enter goes down, before any key typed after it
  // (the submit step runs a moment later: submit_js).
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && event.target.closest
        && event.target.closest('#question')) {
      window.questionAtEnter = event.target.value;
    }
  }, true);
  document.addEventListener('scroll', () => { if (!tip.hidden) hideTip(); }, true);
  // Titles become the tooltip's text (⚠'s is its name too); labels become the message's text.
  const tidy = () => {
    keepInView();
    document.querySelectorAll('#chat a[title]').forEach((a) => {
      a.dataset.tip = a.title;
      a.removeAttribute('title');
      if (a.classList.contains('unsupported')) {
        a.setAttribute('role', 'button');
        a.setAttribute('aria-label', a.dataset.tip);
      }
    });
    document.querySelectorAll("#chat [data-testid='bot'], #chat [data-testid='user']")
      .forEach((m) => {
        const label = `${m.dataset.testid}'s message: ${m.innerText.trim()}`;
        if (m.getAttribute('aria-label') !== label) m.setAttribute('aria-label', label);
      });
  };
  new MutationObserver(tidy).observe(document.body, {
    subtree: true, childList: true, characterData: true,
    attributes: true, attributeFilter: ['title', 'aria-label'],
  });
  // Gradio's copy button copies a message's Markdown, links and all: copy an answer as plain
  // text instead, its [n] markers then its sources as footnotes.
  const plainAnswer = (text) => {
    let answer = null;
    const used = [];
    const plain = text
      .replace(/\[\[(\d+)\]\]\(#src-(\d+)-\d+(?::[\d,]+)?(?: "[^"]*")?\)/g, (m, n, a) => {
        answer = a;
        if (!used.includes(n)) used.push(n);
        return `[${n}]`;
      })
      .replace(/<span class='(?:no-feedback|writing)'><\/span>/g, '')
      .replace(/<a class='unsupported'[^>]*title='([^']*)'>⚠<\/a>/g, '⚠ ($1)');
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


def submit_js(limit: int) -> str:
    """The page's own step on Enter or Send: the question moves from the box into the chat.

    Gives the box (emptied, but for what was typed since), the question for the server ("" when
    none is sent), the chat and the counter.
    Nothing is sent while an answer is written (Stop shows) or when the question is over `limit`
    characters: it stays in the box, and the counter says why. The question is shown inert, as
    the server shows it (webview.inert).
    """
    return rf"""
(text, chat) => {{
  // The box as it was when Enter went down: keys typed since belong to the next question.
  const typed = window.questionAtEnter;
  window.questionAtEnter = null;
  if (typed !== null && typed !== undefined) text = typed;
  const question = (text || '').trim();
  const box = document.querySelector('#question textarea');
  const live = box ? box.value : text;
  const keep = [live, '', chat];
  if (!question || document.querySelector('#stop')) {{
    return [...keep, window.questionCounter(live, {limit}, false)];
  }}
  if (question.length > {limit}) return [...keep, window.questionCounter(live, {limit}, true)];
  const shown = question.replace(/(\\*)!(?=\[)/g, (m, s) => s.length % 2 ? m : `${{s}}\\!`)
    .replace(/<(?=[A-Za-z\/!?])/g, '&lt;');
  const message = {{role: 'user', content: [{{type: 'text', text: shown}}], metadata: null,
    options: null}};
  const rest = live.startsWith(text) ? live.slice(text.length) : '';
  window.followChat();
  const counter = window.questionCounter(rest, {limit}, false);
  return [rest, question, [...(chat || []), message], counter];
}}
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
