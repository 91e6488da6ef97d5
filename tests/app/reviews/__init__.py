"""Tests of bot/app/reviews, module by module."""
