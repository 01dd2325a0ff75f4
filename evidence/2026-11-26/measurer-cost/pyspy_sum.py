import sys, collections, re
incl = collections.Counter(); self_ = collections.Counter(); total = 0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n); total += n
    frames = stack.split(";")
    seen = set()
    for f in frames:
        key = re.sub(r":\d+\)", ")", f)
        if key not in seen:
            incl[key] += n; seen.add(key)
    self_[re.sub(r":\d+\)", ")", frames[-1])] += n
print("total", total)
print("== inclusive")
for k, v in incl.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 60):
    print(f"{v:6d} {100*v/total:5.1f}% {k[:150]}")
print("== self")
for k, v in self_.most_common(40):
    print(f"{v:6d} {100*v/total:5.1f}% {k[:150]}")
