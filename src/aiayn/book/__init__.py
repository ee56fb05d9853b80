"""What the book needs beside the library: its trained models and its plots."""
