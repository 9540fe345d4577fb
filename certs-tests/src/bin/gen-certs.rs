//! `gen-certs DIR`: writes the test PKI (see `certs-tests/README.md`) into DIR.

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: gen-certs DIR");
        std::process::exit(2);
    };
    let started = std::time::Instant::now();
    match sluice_certs_tests::certs::generate(std::path::Path::new(&dir)) {
        Ok(files) => eprintln!("gen-certs: wrote {} files into {dir} in {:?}", files.len(), started.elapsed()),
        Err(error) => {
            eprintln!("gen-certs: {error}");
            std::process::exit(1);
        }
    }
}
