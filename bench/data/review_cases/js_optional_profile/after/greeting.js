// The greeting at the top of the dashboard.

function displayName(user) {
  const nickname = user.profile.nickname.trim();
  if (nickname) {
    return nickname;
  }
  return user.login;
}

function greeting(user, hour) {
  const part = hour < 12 ? "morning" : hour < 18 ? "afternoon" : "evening";
  return `Good ${part}, ${displayName(user)}!`;
}

module.exports = { displayName, greeting };
