import { describe, expect, it } from 'vitest';
import {
  chooseTransport,
  messageIdFor,
  NO_SENDER_ERROR,
  planDelivery,
} from '../../src/domain/delivery-plan.js';

const project = { fromEmail: null, fromName: null, contactEmail: null };
const base = {
  project,
  smtp: null,
  defaultFrom: null,
  globalTarget: null,
  production: false,
  recipient: 'jane@example.org',
  idLeft: 'req-1',
};

describe('chooseTransport', () => {
  it.each([
    ['project', 'global', false, 'project'],
    ['project', null, true, 'project'],
    [null, 'global', true, 'global'],
    [null, null, false, 'capture'],
    [null, null, true, 'none'],
  ] as const)('project %s, global %s, production %s → %s', (own, global, production, kind) => {
    expect(chooseTransport(own, global, production).kind).toBe(kind);
  });
});

describe('planDelivery', () => {
  it('plans SMTP over the project relay with its sender, the envelope and a stable Message-ID', () => {
    const result = planDelivery({
      ...base,
      smtp: { target: 'relay-a', fromEmail: 'no-reply@shop.example', fromName: 'Shop' },
      globalTarget: 'relay-b',
      recipient: 'Jane <jane@example.org>',
    });
    expect(result).toEqual({
      ok: true,
      plan: {
        transport: 'smtp',
        target: 'relay-a',
        from: { name: 'Shop', address: 'no-reply@shop.example' },
        to: { name: 'Jane', address: 'jane@example.org' },
        envelope: { from: 'no-reply@shop.example', to: 'jane@example.org' },
        messageId: 'req-1@shop.example',
      },
    });
  });

  it('captures outside production when no relay is configured', () => {
    const result = planDelivery({ ...base, project: { ...project, contactEmail: 'ops@shop.example' } });
    expect(result.ok && result.plan.transport).toBe('capture');
    expect(result.ok && result.plan.target).toBeNull();
  });

  it.each([
    [{ recipient: 'not an address' }, 'recipient', 'Invalid recipient address: not an address', 'capture'],
    [{ production: true }, 'transport', 'SMTP not configured', null],
    [{ globalTarget: 'relay' }, 'sender', NO_SENDER_ERROR, 'smtp'],
  ] as const)('refuses %o: %s', (change, problem, error, transport) => {
    expect(planDelivery({ ...base, ...change })).toEqual({ ok: false, problem, error, transport });
  });

  it('checks the recipient before the transport, and the transport before the sender', () => {
    const result = planDelivery({ ...base, recipient: 'x', production: true });
    expect(!result.ok && result.problem).toBe('recipient');
  });
});

describe('messageIdFor', () => {
  it('puts the id in the domain of the sender', () => {
    expect(messageIdFor('abc', { address: 'a@b.example' })).toBe('abc@b.example');
  });
});
