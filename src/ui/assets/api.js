// JSON API client. Paths are relative so that a reverse-proxy prefix works.

export class ApiError extends Error {
  constructor(status, code, message, detail) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

// Built by hand rather than with URLSearchParams, which writes spaces as '+'.
function query(params) {
  const parts = [];
  for (const [key, value] of Object.entries(params ?? {})) {
    if (value == null || value === '') continue;
    parts.push(`${encodeURIComponent(key)}=${encodeURIComponent(value)}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

async function errorFrom(response) {
  let first = null;
  try {
    first = (await response.json())?.errors?.[0] ?? null;
  } catch {
    // not JSON (a proxy's error page, say)
  }
  const detail = typeof first?.detail === 'string' ? first.detail : null;
  return new ApiError(response.status, first?.code ?? null,
    first?.message || response.statusText || 'request failed', detail);
}

export async function getJSON(path, params, signal) {
  const response = await fetch(path + query(params), {
    signal,
    cache: 'no-store',
    credentials: 'same-origin',
    headers: { Accept: 'application/json' },
  });
  if (!response.ok) throw await errorFrom(response);
  return response.json();
}

const NO_SESSION = { user: null, auth: null, registry: null };

export async function getSession() {
  try {
    return { ...NO_SESSION, ...(await getJSON('api/whoami')) };
  } catch {
    return NO_SESSION;
  }
}

// What goes in front of the repository name in a pull command.
export function registryHost(session) {
  return session?.registry || location.host;
}
