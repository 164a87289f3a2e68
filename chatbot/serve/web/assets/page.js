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
