// Sessions issued at sign-in.

export interface Session {
  userId: string;
  issuedAt: number; // milliseconds since the epoch
  ttlMs: number;
}

export function expiresAt(session: Session): number {
  return session.issuedAt + session.ttlMs;
}

export function isExpired(session: Session, now: number): boolean {
  return expiresAt(session) > now;
}

export function activeSessions(sessions: Session[], now: number): Session[] {
  return sessions.filter((s) => !isExpired(s, now));
}
