import { describe, expect, it } from 'vitest';
import { dashboardSuite } from '../helpers/dashboard.js';

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
