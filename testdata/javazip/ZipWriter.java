import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * Writes a ZIP package the way DSpace's ResourceSync module does: with
 * java.util.zip.ZipOutputStream, every entry deflated (so each is followed
 * by a data descriptor), in the order given. Usage: ZipWriter OUT.zip
 * [CHARSET], with one "NAME<TAB>FILE" line per entry on standard input (in
 * UTF-8): the entry is named NAME exactly (leading slash, backslashes and
 * all) and holds FILE's bytes. Names are encoded in CHARSET (default UTF-8,
 * with the UTF-8 flag set; any other, such as IBM437, without it).
 */
public final class ZipWriter {
    public static void main(String[] args) throws Exception {
        Charset names = args.length > 1 ? Charset.forName(args[1]) : StandardCharsets.UTF_8;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (ZipOutputStream zip = new ZipOutputStream(new FileOutputStream(args[0]), names)) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                int tab = line.indexOf('\t');
                ZipEntry e = new ZipEntry(line.substring(0, tab));
                zip.putNextEntry(e);
                zip.write(Files.readAllBytes(Paths.get(line.substring(tab + 1))));
                zip.closeEntry();
            }
        }
    }
}
