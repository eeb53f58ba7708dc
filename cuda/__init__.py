"""CUDA C kernel sources, installed as ``edgecli.cuda`` so that wheels ship them."""
