import { describe, expect, it } from 'vitest';
import { CompiledMessage } from '../../src/domain/message.js';
import { closestName } from '../../src/domain/suggest.js';

describe('the closest template name', () => {
  const names = ['user_created', 'password_reset', 'admin_created', 'invoice'];

  it.each([
    ['User_Created', 'user_created'],
    ['USER_CREATED', 'user_created'],
    ['user_creatd', 'user_created'],
    ['usr_created', 'user_created'],
    ['admin_creatde', 'admin_created'],
    ['password-reset', 'password_reset'],
    ['invoices', 'invoice'],
    ['Account_creation', null],
    ['welcome', null],
    ['x', null],
  ])('%j → %j', (name, expected) => {
    expect(closestName(name, names)).toBe(expected);
  });

  it('finds nothing among no names', () => {
    expect(closestName('user_created', [])).toBeNull();
  });
});

describe('placeholders that render blank', () => {
  const message = new CompiledMessage({
    subject: 'Hi {{user_name}}',
    text: '{{role}} {{count}} {{flag}} {{list}} {{obj}} {{nothing}} {{order.id}} {{missing}}',
    html: '{{{raw}}}',
  });

  it('are the missing keys, nulls, lists and objects, never numbers, booleans or text', () => {
    const blank = message.blankPlaceholders({
      user_name: 'Jane',
      role: '',
      count: 0,
      flag: false,
      list: ['a'],
      obj: { a: 1 },
      nothing: null,
      order: { id: 7 },
      raw: '<b>x</b>',
    });
    expect(blank).toEqual(['role', 'list', 'obj', 'nothing', 'missing']);
  });

  it("are a block's values only when missing: a list or an object is what #each and #with read", () => {
    const blocks = new CompiledMessage({
      subject: '{{#if trial}}Trial{{/if}}',
      text: '{{#each items}}{{this}}{{/each}} {{#with order}}{{id}}{{/with}} {{#if role}}{{role}}{{/if}}',
      html: null,
    });
    expect(blocks.placeholders).toEqual(['trial', 'items', 'order', 'role']);
    expect(blocks.blankPlaceholders({ trial: false, items: ['a'], order: { id: 1 }, role: ['x'] })).toEqual([
      'role',
    ]);
    expect(blocks.blankPlaceholders({ items: [], order: null })).toEqual(['trial', 'order', 'role']);
  });

  it('are every placeholder when there is no data', () => {
    expect(message.blankPlaceholders({})).toEqual(message.placeholders);
  });
});
