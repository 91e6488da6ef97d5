// The leaderboard widget: the best three scores, without touching the caller's list.

export interface Score {
  player: string;
  points: number;
}

export function topThree(scores: readonly Score[]): Score[] {
  return [...scores].sort((a, b) => b.points - a.points).slice(0, 3);
}
