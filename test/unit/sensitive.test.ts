import { describe, expect, it } from 'vitest';
import { CompiledMessage } from '../../src/domain/message.js';
import { isSensitiveName, MASK, maskContent, type Rerender } from '../../src/domain/sensitive.js';

describe('sensitive placeholders', () => {
  it.each([
    ['password', true],
    ['new_Password', true],
    ['api_token', true],
    ['client_secret', true],
    ['login_code', true],
    ['zip', false],
    ['user_name', false],
  ])('%s is sensitive: %s', (name, sensitive) => {
    expect(isSensitiveName(name)).toBe(sensitive);
  });

  it('masks their values in the data and wherever they appear in the rendered message', () => {
    const masked = maskContent({
      data: { user_name: 'Jane', password: 's3cr3t<&>', nested: { reset_token: ['abcdef'] }, code: 42 },
      subject: 'Welcome Jane',
      text: 'Your password is s3cr3t<&>, your link abcdef, your code 42.',
      html: '<p>Your password is s3cr3t&lt;&amp;&gt;</p>',
    });
    expect(masked.data).toEqual({
      user_name: 'Jane',
      password: MASK,
      nested: { reset_token: [MASK] },
      code: MASK,
    });
    expect(masked.text).toBe(`Your password is ${MASK}, your link ${MASK}, your code 42.`);
    expect(masked.html).toBe(`<p>Your password is ${MASK}</p>`);
    expect(masked.subject).toBe('Welcome Jane');
    expect(masked.masked).toBe(3);
  });

  it('leaves content without sensitive placeholders as it is', () => {
    const content = { data: { a: 'x' }, subject: 's', text: 't', html: null };
    expect(maskContent(content)).toEqual({ ...content, masked: 0 });
  });

  it('masks a secret only where it was put, not inside the words of the template', () => {
    const template = new CompiledMessage({
      subject: 'Your new password',
      text: 'Your password is {{password}}. Keep your password safe.',
      html: '<p>Your password: <b>{{password}}</b></p>',
    });
    const rerender: Rerender = (data) => template.render(data as Record<string, unknown>);
    for (const password of ['password', 'pass', 'word']) {
      const data = { password };
      const masked = maskContent({ data, ...template.render(data) }, rerender);
      expect(masked.subject).toBe('Your new password');
      expect(masked.text).toBe(`Your password is ${MASK}. Keep your password safe.`);
      expect(masked.html).toBe(`<p>Your password: <b>${MASK}</b></p>`);
      expect(masked.masked).toBe(1);
    }
  });

  it('without the template as it was, masks a secret only as a whole word', () => {
    const masked = maskContent({
      data: { password: 'pass' },
      subject: 'Your password',
      text: 'Your password is pass; passes, bypass and pass-through stay.',
      html: null,
    });
    expect(masked.subject).toBe('Your password');
    expect(masked.text).toBe(`Your password is ${MASK}; passes, bypass and ${MASK}-through stay.`);
  });
});
