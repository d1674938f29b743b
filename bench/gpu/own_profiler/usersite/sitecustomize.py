# A user's own sitecustomize (the program's environment brings one): gputop's loader must run it first.
import sys

print("the user's own sitecustomize ran", file=sys.stderr)
