// Drives a running ordo node with the official OpenAI client (run by tests/cli_openai.sh).
// Usage: node check.mjs BASE_URL API_KEY. Prints one line per check; exits 1 if any failed.
import OpenAI from 'openai';

const [baseURL, apiKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
let failed = 0;
function check(name, ok, detail = '') {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${ok || !detail ? '' : ': ' + detail}`);
  if (!ok) failed++;
}
async function collect(stream, pick) {
  let text = '', last = null, n = 0;
  for await (const chunk of stream) {
    text += pick(chunk) ?? '';
    last = chunk;
    n++;
  }
  return { text, last, n };
}

const models = await client.models.list();
const model = models.data[0]?.id;
check('models.list names the served model', typeof model === 'string' && model.startsWith('ordo-'), JSON.stringify(models.data));

const prompt = 'The quick brown fox jumps over the lazy dog. Once upon a time';
const done = await client.completions.create({ model, prompt, max_tokens: 12 });
const text = done.choices[0].text;
check('completion has text and usage', typeof text === 'string' && done.usage.completion_tokens === 12,
      JSON.stringify(done));
check('completion finish_reason is length', done.choices[0].finish_reason === 'length', done.choices[0].finish_reason);

const streamed = await collect(await client.completions.create({ model, prompt, max_tokens: 12, stream: true }),
                               (c) => c.choices[0]?.text);
check('streamed completion equals the whole one', streamed.text === text, `${JSON.stringify(streamed.text)} vs ${JSON.stringify(text)}`);

const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say something.' }];
const chat = await client.chat.completions.create({ model, messages, max_tokens: 10 });
const content = chat.choices[0].message.content;
check('chat completion answers as the assistant', chat.choices[0].message.role === 'assistant' && typeof content === 'string',
      JSON.stringify(chat));
check('chat completion object', chat.object === 'chat.completion' && chat.usage.completion_tokens === 10, JSON.stringify(chat));

const chatStream = await collect(
  await client.chat.completions.create({ model, messages, max_tokens: 10, stream: true, stream_options: { include_usage: true } }),
  (c) => c.choices[0]?.delta?.content);
check('streamed chat equals the whole one', chatStream.text === content, `${JSON.stringify(chatStream.text)} vs ${JSON.stringify(content)}`);
check('include_usage sends usage last', chatStream.last?.usage?.completion_tokens === 10 && chatStream.last.choices.length === 0,
      JSON.stringify(chatStream.last));

// stop: an ASCII character from inside the completion ends it there and is not part of the text
// (a byte below 0x80 is never inside a multi-byte sequence, so its first byte is its first place).
let at = -1;
for (let i = 1; i < text.length; i++)
  if (text.charCodeAt(i) < 0x80) { at = i; break; }
if (at > 0) {
  const stop = text[at];
  const cut = text.indexOf(stop);
  const stopped = await client.completions.create({ model, prompt, max_tokens: 12, stop: [stop] });
  check('stop ends the completion before the stop string',
        stopped.choices[0].text === text.slice(0, cut) && stopped.choices[0].finish_reason === 'stop',
        `${JSON.stringify(stopped.choices[0])} stop ${JSON.stringify(stop)} in ${JSON.stringify(text)}`);
} else {
  check('the completion holds an ASCII character to stop at', false, JSON.stringify(text));
}

const wrong = new OpenAI({ baseURL, apiKey: 'not-the-key', maxRetries: 0 });
try {
  await wrong.completions.create({ model, prompt, max_tokens: 2 });
  check('a wrong API key is refused', false, 'the request succeeded');
} catch (e) {
  check('a wrong API key is refused with 401', e instanceof OpenAI.AuthenticationError && e.status === 401, String(e));
}

console.log(failed ? `${failed} failed` : 'all passed');
process.exit(failed ? 1 : 0);
