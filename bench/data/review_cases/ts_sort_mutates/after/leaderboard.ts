// The leaderboard widget: the best three scores, without touching the caller's list.

export interface Score {
  player: string;
  points: number;
}

export function topN(scores: Score[], n: number): Score[] {
  return scores.sort((a, b) => b.points - a.points).slice(0, n);
}

export function topThree(scores: Score[]): Score[] {
  return topN(scores, 3);
}
