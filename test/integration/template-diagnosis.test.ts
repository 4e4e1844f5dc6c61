import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { diagnoseTemplate } from '../../src/services/template-preview.js';
import { createTestContext, seedProject, type TestContext } from '../helpers/services.js';

/** What a message page and `herald notification show` say about a message's template. */

let ctx: TestContext;
let projectId: number;

beforeAll(async () => {
  ctx = await createTestContext();
  ({ projectId } = await seedProject(ctx.services));
  await ctx.services.templates.create(projectId, {
    name: 'password_reset',
    subject: 'Reset',
    text: 'Hi {{user_name}}, your password is {{password}}.',
  });
});
afterAll(() => ctx.close());

/** The diagnosis without its rendering function (its output is checked where masking is). */
async function diagnose(projectId: number, template: string, data: string | null) {
  const diagnosis = await diagnoseTemplate(ctx.services.templates, {
    project_id: projectId,
    template,
    data,
    locale: null,
  });
  if (!diagnosis.found) return diagnosis;
  const { rerender, ...rest } = diagnosis;
  expect(typeof rerender).toBe('function');
  return rest;
}

describe('template diagnosis', () => {
  it('names the placeholders that render blank with the stored data', async () => {
    const data = JSON.stringify({ user_name: 'Jane', role: ['admin'] });
    expect(await diagnose(projectId, 'user_created', data)).toEqual({
      found: true,
      blank: ['role'],
    });
    expect(await diagnose(projectId, 'password_reset', '{}')).toEqual({
      found: true,
      blank: ['user_name', 'password'],
    });
  });

  it('says nothing about blanks once the data is erased or unreadable', async () => {
    expect(await diagnose(projectId, 'user_created', null)).toEqual({
      found: true,
      blank: null,
    });
    expect(await diagnose(projectId, 'user_created', 'not json')).toEqual({
      found: true,
      blank: null,
    });
  });

  it("lists the project's names and the closest one for a name that matches nothing", async () => {
    expect(await diagnose(projectId, 'User_Created', '{}')).toEqual({
      found: false,
      names: ['password_reset', 'user_created'],
      suggestion: 'user_created',
    });
    expect(await diagnose(projectId, 'Account_creation', '{}')).toEqual({
      found: false,
      names: ['password_reset', 'user_created'],
      suggestion: null,
    });
  });

  it("never looks at another project's templates", async () => {
    const other = await seedProject(ctx.services);
    const diagnosis = await diagnose(other.projectId, 'password_reset', '{}');
    expect(diagnosis).toEqual({ found: false, names: ['user_created'], suggestion: null });
  });
});
