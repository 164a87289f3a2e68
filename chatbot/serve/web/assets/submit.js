(text, chat) => {
  // The box as it was when Enter went down: keys typed since belong to the next question.
  const typed = window.questionAtEnter;
  window.questionAtEnter = null;
  if (typed !== null && typed !== undefined) text = typed;
  const question = (text || '').trim();
  const box = document.querySelector('#question textarea');
  const live = box ? box.value : text;
  const keep = [live, '', chat];
  if (!question || document.querySelector('#stop')) {
    return [...keep, window.questionCounter(live, __LIMIT__, false)];
  }
  if (question.length > __LIMIT__) return [...keep, window.questionCounter(live, __LIMIT__, true)];
  const shown = question.replace(/(\\*)!(?=\[)/g, (m, s) => s.length % 2 ? m : `${s}\\!`)
    .replace(/<(?=[A-Za-z\/!?])/g, '&lt;');
  const message = {role: 'user', content: [{type: 'text', text: shown}], metadata: null,
    options: null};
  const rest = live.startsWith(text) ? live.slice(text.length) : '';
  window.followChat();
  const counter = window.questionCounter(rest, __LIMIT__, false);
  return [rest, question, [...(chat || []), message], counter];
}
