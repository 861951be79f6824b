/**
 * Which local files a capture may name. A path is judged lexically first (path.resolve, no file
 * system access) and only then by its real path (symlinks resolved; for a missing file, the real
 * path of its nearest existing ancestor), so that every path outside the allowed directories gets
 * the same answer whether it exists or not: the file system is never probed outside them.
 *
 * Uploads live in DATA_DIR/imagery/uploads/<account id>/upl_…/ and belong to that account: at
 * registration the uploads directory is denied and only the caller's own folder inside it allowed.
 */
import { readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const OUTSIDE_ROOTS = 'the path is outside the allowed imagery directories (IMAGERY_ROOTS)';

export class LocalPathError extends Error {
  constructor(
    readonly kind: 'outside' | 'missing',
    message: string,
  ) {
    super(message);
    this.name = 'LocalPathError';
  }
}

export interface PathRules {
  /** Directories whose files may be read. */
  allow: string[];
  /** Directories inside allowed ones whose files may not be read, unless a more specific allowed directory holds them. */
  deny: string[];
}

/** The rules for a capture registered by an account: the roots, but of the uploads only the account's own. */
export function registrationRules(roots: string[], uploadDir: string | undefined, accountId: string): PathRules {
  return uploadDir
    ? { allow: [...roots, accountUploadDir(uploadDir, accountId)], deny: [uploadDir] }
    : { allow: roots, deny: [] };
}

/** Where an account's uploads are stored. */
export function accountUploadDir(uploadDir: string, accountId: string): string {
  // Account ids are generated (`acc_` + base64url); anything else must not become a path segment.
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(accountId))
    throw new Error(`account id ${JSON.stringify(accountId)} cannot name an upload folder`);
  return path.join(uploadDir, accountId);
}

const within = (p: string, dir: string) => p === dir || p.startsWith(dir.endsWith(path.sep) ? dir : dir + path.sep);

/** Allowed when the most specific rule directory holding `p` is an allowed one. */
function allowedBy(p: string, rules: PathRules): boolean {
  let depth = -1;
  let ok = false;
  for (const d of rules.allow) {
    if (within(p, d) && d.length > depth) [depth, ok] = [d.length, true];
  }
  for (const d of rules.deny) {
    if (within(p, d) && d.length >= depth) [depth, ok] = [d.length, false];
  }
  return ok;
}

/** The href as an absolute path, without touching the file system; null for a file: URL that names no local path. */
function lexicalPath(href: string): string | null {
  let p = href;
  if (/^file:/i.test(href)) {
    try {
      p = fileURLToPath(href);
    } catch {
      return null;
    }
  }
  return p.includes('\0') ? null : path.resolve(p);
}

/**
 * The real path of `p`, or, when `p` does not exist, the real path of its nearest existing
 * ancestor: the place the file would be in. A dangling symlink on the way is followed (its target
 * decides where that is), so a link inside a root to a missing file outside counts as outside.
 */
async function realOrAncestor(p: string, hops = 0): Promise<{ real: string; exists: boolean }> {
  try {
    return { real: await realpath(p), exists: true };
  } catch {
    /* missing: find where it would be */
  }
  const rest: string[] = [];
  for (let q = p; q !== path.dirname(q); ) {
    rest.unshift(path.basename(q));
    q = path.dirname(q);
    const parent = await realpath(q).catch(() => null);
    if (parent === null) continue;
    const link = hops < 40 ? await readlink(path.join(parent, rest[0]!)).catch(() => null) : null;
    return link === null
      ? { real: parent, exists: false }
      : realOrAncestor(path.resolve(parent, link, ...rest.slice(1)), hops + 1);
  }
  return { real: path.parse(p).root, exists: false };
}

/** Each directory as given and by its real path (a root reached through a symlink matches either way). */
async function withRealPaths(dirs: string[]): Promise<string[]> {
  const out = new Set(dirs.map((d) => path.resolve(d)));
  for (const d of [...out]) {
    const r = await realpath(d).catch(() => null);
    if (r) out.add(r);
  }
  return [...out];
}

/**
 * The real path of a local href that the rules allow (`roots` alone: every root allowed);
 * LocalPathError otherwise: `outside` (one message for every such path), or `missing`.
 */
export async function resolveLocal(href: string, roots: string[] | PathRules): Promise<string> {
  const given = Array.isArray(roots) ? { allow: roots, deny: [] } : roots;
  const rules = { allow: await withRealPaths(given.allow), deny: await withRealPaths(given.deny) };
  const p = lexicalPath(href);
  if (p === null || !allowedBy(p, rules)) throw new LocalPathError('outside', OUTSIDE_ROOTS);
  const { real, exists } = await realOrAncestor(p);
  if (!allowedBy(real, rules)) throw new LocalPathError('outside', OUTSIDE_ROOTS);
  if (!exists) throw new LocalPathError('missing', `file not found: ${p}`);
  return real;
}
