import { describe, expect, it } from 'vitest';
import { csrfOf, dashboardSuite } from '../helpers/dashboard.js';
import { send, sendOk } from '../helpers/http.js';
import { seedProject } from '../helpers/services.js';

/**
 * The projects' pages: a project whose mail has no From at all accepts sends that all fail, and
 * its overview and SMTP pages say so until any source of a From is set; the welcome after setup
 * fits whether projects exist.
 */

const suite = dashboardSuite();

const BANNER = 'data-testid="no-sender"';

describe('a project without a from address', () => {
  it('is shown a banner on its overview and SMTP pages until it has one', async () => {
    const { project } = await suite.ctx.services.projects.create({ name: 'no-sender' });
    for (const page of [`/projects/${project.id}`, `/projects/${project.id}/smtp`]) {
      const response = await suite.client.get(page);
      expect(response.statusCode).toBe(200);
      expect(response.body).toContain(BANNER);
      expect(response.body).toContain('No from address.');
    }

    await suite.ctx.services.projects.update(project.id, { contactEmail: 'ops@no-sender.example' });
    for (const page of [`/projects/${project.id}`, `/projects/${project.id}/smtp`])
      expect((await suite.client.get(page)).body).not.toContain(BANNER);
  });

  it('is not shown the banner when its SMTP settings give the from address', async () => {
    const { project } = await suite.ctx.services.projects.create({ name: 'smtp-sender' });
    await suite.ctx.services.smtpSettings.setFromUrl(project.id, 'smtp://127.0.0.1:2525', {
      fromEmail: 'mail@smtp.example',
    });
    expect((await suite.client.get(`/projects/${project.id}`)).body).not.toContain(BANNER);
  });
});

describe('the welcome after setup', () => {
  it('asks for a first project only when there is none', async () => {
    // This file's other tests made projects already: the welcome points at them.
    const page = await suite.client.get('/projects?notice=welcome');
    expect(page.body).toContain('Welcome to Herald. Your projects are below');
    expect(page.body).not.toContain('Create a project to get an API key.');
  });
});

describe("a project's name in place of its id", () => {
  it('goes on to the same page at the id, and a name no project has is a 404', async () => {
    const { project } = await suite.ctx.services.projects.create({ name: 'by-name' });
    const overview = await suite.client.get('/projects/by-name');
    expect(overview.statusCode).toBe(302);
    expect(overview.headers.location).toBe(`/projects/${project.id}`);
    const templates = await suite.client.get('/projects/by-name/templates?notice=saved');
    expect(templates.headers.location).toBe(`/projects/${project.id}/templates?notice=saved`);

    const unknown = await suite.client.get('/projects/no-such-project/templates');
    expect(unknown.statusCode).toBe(404);
    expect(unknown.body).toContain('Project not found: no-such-project');
    // Forms post to the id; a post to a name is not redirected (the body would be lost).
    const csrf = csrfOf(await suite.client.get(`/projects/${project.id}`));
    expect((await suite.client.post('/projects/by-name/rotate-key', {}, csrf)).statusCode).toBe(400);
  });
});

describe('names the dashboard could not open', () => {
  it("refuses a project named 'new' and a template or layout named '.' or '..'", async () => {
    const { projects, templates, layouts } = suite.ctx.services;
    await expect(projects.create({ name: 'new' })).rejects.toThrow("Project name 'new' is reserved");
    const { project } = await projects.create({ name: 'dots' });
    await expect(projects.update(project.id, { name: 'new' })).rejects.toThrow(
      "Project name 'new' is reserved",
    );
    // A project named so before the rule keeps its name when its other settings are saved.
    const db = suite.ctx.services.storage.db;
    await db.updateTable('projects').set({ name: 'new' }).where('id', '=', project.id).execute();
    expect((await projects.update(project.id, { name: 'new', quotaLimit: 5 })).quotaLimit).toBe(5);
    await db.updateTable('projects').set({ name: 'dots' }).where('id', '=', project.id).execute();
    for (const name of ['.', '..'])
      await expect(templates.create(project.id, { name, subject: 'Hi', text: 'Hello' })).rejects.toThrow(
        "Template name cannot be '.' or '..'",
      );
    await expect(layouts.create(project.id, { name: '..', html: '{{{content}}}' })).rejects.toThrow(
      "Layout name cannot be '.' or '..'",
    );
    // Nor one with an invisible character, which would look like another name everywhere.
    for (const name of ['zw\u200bx', 'rtl\u202eevil', '\ufeffbom'])
      await expect(templates.create(project.id, { name, subject: 'Hi', text: 'Hello' })).rejects.toThrow(
        'Template name must be 1–200 characters without spaces or invisible characters',
      );
    // The joiners of Persian words and emoji sequences are letters' business, not invisible.
    await templates.create(project.id, { name: 'می\u200cخواهم', subject: 'Hi', text: 'Hello' });
    // Dots within a name are fine: the page opens.
    await templates.create(project.id, { name: 'user.created', subject: 'Hi', text: 'Hello' });
    expect((await suite.client.get(`/projects/${project.id}/templates/edit/user.created`)).statusCode).toBe(
      200,
    );
  });
});

describe('deleting a project', () => {
  it('asks for its name, refuses while its mail waits unless told, and ends its key', async () => {
    const { projectId, apiKey, name } = await seedProject(suite.ctx.services, { name: 'doomed' });
    await sendOk(suite.ctx.app, apiKey);
    const overview = await suite.client.get(`/projects/${projectId}`);
    expect(overview.body).toContain(`action="/projects/${projectId}/delete"`);
    const csrf = csrfOf(overview);

    const unconfirmed = await suite.client.post(
      `/projects/${projectId}/delete`,
      { confirm_name: 'Doomed' },
      csrf,
    );
    expect(unconfirmed.statusCode).toBe(400);
    expect(unconfirmed.body).toContain(
      'Type the project&#39;s name, doomed, to confirm: nothing was deleted.',
    );
    expect(unconfirmed.body).toMatch(/<details class="danger-zone" open>\s*<summary>Delete project…/);

    const waiting = await suite.client.post(`/projects/${projectId}/delete`, { confirm_name: name }, csrf);
    expect(waiting.statusCode).toBe(409);
    expect(waiting.body).toContain('Project doomed has 1 notification queued or being sent');
    expect(await suite.ctx.services.projects.get(projectId)).toMatchObject({ name });

    const deleted = await suite.client.post(
      `/projects/${projectId}/delete`,
      { confirm_name: name, force: 'yes' },
      csrf,
    );
    expect(deleted.statusCode).toBe(303);
    expect(deleted.headers.location).toBe('/projects?notice=deleted');
    expect((await suite.client.get('/projects?notice=deleted')).body).toContain(
      'Project deleted; its API key no longer works.',
    );
    expect(
      (await send(suite.ctx.app, apiKey, { template: 'user_created', to: 'a@example.org' })).statusCode,
    ).toBe(401);
    expect((await suite.client.get(`/projects/${projectId}`)).statusCode).toBe(404);
  });

  it('is refused without the form token', async () => {
    const { projectId, name } = await seedProject(suite.ctx.services, { name: 'kept' });
    expect(
      (await suite.client.post(`/projects/${projectId}/delete`, { confirm_name: name }, null)).statusCode,
    ).toBe(403);
    expect(await suite.ctx.services.projects.get(projectId)).toMatchObject({ name });
  });
});
