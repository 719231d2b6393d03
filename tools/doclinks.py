#!/usr/bin/env python3
"""Check every relative markdown link in README.md, ARCHITECTURE.md and docs/*.md: the file
exists, and an #anchor names a heading of that file (GitHub's slug rule)."""
import re, os, sys, glob, unicodedata
root = sys.argv[1] if len(sys.argv) > 1 else '.'
os.chdir(root)
files = ['README.md', 'ARCHITECTURE.md'] + sorted(glob.glob('docs/*.md'))
def slug(h):
    h = h.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')
def anchors(path):
    out = set()
    incode = False
    for line in open(path):
        if line.startswith('```'): incode = not incode
        if not incode and line.startswith('#'):
            out.add(slug(line.lstrip('#').strip().replace('`', '')))
    return out
bad = 0; n = 0
for f in files:
    text = open(f).read()
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        t = m.group(1)
        if re.match(r'[a-z]+://', t) or t.startswith('mailto:'): continue
        n += 1
        path, _, anc = t.partition('#')
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            print(f'{f}: {t}: no such file {target}'); bad += 1; continue
        if anc and os.path.isfile(target) and anc not in anchors(target):
            print(f'{f}: {t}: no heading #{anc} in {target}'); bad += 1
print(f'{n} relative links checked, {bad} broken')
sys.exit(1 if bad else 0)
