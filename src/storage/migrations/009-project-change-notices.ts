import type { Ddl } from './columns.js';

/** Migration 009_project_change_notices: released, so never edited (a change is a new migration). */
export const projectChangeNotices: Ddl = (t) =>
  // Every change to projects (a rotated key, a new quota), by any process or by hand, sends a
  // notice on commit on the channel `herald_projects`: server processes listen for it to keep
  // API keys in memory (postgres/project-changes.ts). SQLite needs none: a connection sees
  // other connections' commits in its data_version.
  t.dialect === 'sqlite'
    ? []
    : [
        `CREATE FUNCTION herald_projects_changed() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            PERFORM pg_notify('herald_projects', '');
            RETURN NULL;
          END
          $$`,
        `CREATE TRIGGER projects_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON projects
            FOR EACH STATEMENT EXECUTE FUNCTION herald_projects_changed()`,
      ];
