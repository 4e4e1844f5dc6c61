/**
 * Render speed, per message, of the placeholder engine (Herald before its template language) and
 * of the Handlebars engine, in the same run on the same templates and data: a welcome message in
 * the placeholder syntax (both engines render it), and an order with a ten-line #each, an #if and
 * a layout (Handlebars only). Each figure is the median of several timed rounds of many renders.
 *
 *   npm run bench:render
 */
import { CompiledMessage, type LayoutSource, type TemplateSource } from '../src/domain/message.js';

const ROUNDS = 7;
const RENDERS = 20_000;

function timePerMessage(message: CompiledMessage, values: Record<string, unknown>): number {
  const rounds: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint();
    let length = 0;
    for (let i = 0; i < RENDERS; i++) length += message.render(values).text.length;
    if (length === 0) throw new Error('nothing rendered');
    rounds.push(Number(process.hrtime.bigint() - start) / RENDERS);
  }
  rounds.sort((a, b) => a - b);
  return rounds[Math.floor(ROUNDS / 2)] as number;
}

const welcome: TemplateSource = {
  subject: 'Welcome to {{company}}, {{ user_name }}',
  text: 'Hello {{user_name}},\n\nYour role is {{role}}. Sign in at {{url}}.\n\nThe {{company}} team',
  html: '<h1>Hello {{user_name}}</h1><p>Your role is <b>{{role}}</b>.</p><p><a href="{{url}}">Sign in</a></p>',
};
const welcomeData = {
  user_name: "Jane O'Brien",
  role: 'admin <owner>',
  url: 'https://example.org/a?b=1&c=2',
  company: 'Shop',
};

const order: TemplateSource = {
  subject: 'Order {{order.id}} shipped',
  text: '{{#each order.lines}}- {{name}} × {{qty}}: {{price}}\n{{/each}}{{#if trial}}Your trial ends {{trial_end}}.{{/if}}',
  html: '<table>{{#each order.lines}}<tr><td>{{name}}</td><td>{{qty}}</td><td>{{price}}</td></tr>{{/each}}</table>{{#if trial}}<p>Trial ends {{trial_end}}</p>{{/if}}',
};
const layout: LayoutSource = {
  html: '<main>{{{content}}}</main><footer>{{company}}</footer>',
  text: '{{content}}\n-- {{company}}',
};
const orderData = {
  company: 'Shop & Co',
  trial: true,
  trial_end: 'Friday',
  order: {
    id: 'A-17',
    lines: Array.from({ length: 10 }, (_, i) => ({ name: `Item <${i}>`, qty: i + 1, price: `${i}.99` })),
  },
};

const rows: [string, number][] = [
  [
    'welcome, placeholder engine (before)',
    timePerMessage(new CompiledMessage({ ...welcome, engine: 'placeholders' }), welcomeData),
  ],
  [
    'welcome, Handlebars engine',
    timePerMessage(new CompiledMessage({ ...welcome, engine: 'handlebars' }), welcomeData),
  ],
  ['order: 10-line #each, #if, layout', timePerMessage(new CompiledMessage(order, layout), orderData)],
];
console.log(
  `node ${process.version}, ${ROUNDS} rounds × ${RENDERS} renders, median per message (subject + text + HTML):`,
);
for (const [label, ns] of rows) console.log(`  ${label.padEnd(40)} ${(ns / 1000).toFixed(2).padStart(7)} µs`);
