# Never runs: the policy refuses to stage .ssh/id_rsa, so the call stops before
# anything is staged or run.
print(open("inputs/id_rsa").read())
