"""The card and its rules, activity, the view a renderer gets, owners."""
